package roles

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"slices"
	"strings"
	"unicode"

	"github.com/alecthomas/kong"
	"github.com/posener/complete"
	"github.com/willabides/kongplete"

	"github.com/jq-dev/jq/config"
	"github.com/jq-dev/jq/internal/buildinfo"
	"github.com/jq-dev/jq/internal/typo"
	"github.com/jq-dev/jq/roles/admin"
	"github.com/jq-dev/jq/roles/healthcheck"
)

// The words that are not a role's grammar but act before one is chosen.
const (
	helpCommand       = "help"
	completionCommand = "completion"
)

// globalGroup puts the flags every command accepts in their own help section after the command's
// own flags (kong prints ungrouped flags first), so `jq job submit --help` starts with submit's.
var globalGroup = kong.ExplicitGroups([]kong.Group{{Key: "global", Title: "Global flags:"}})

// envNotConfig are the JQ_ variables read outside the configuration tree: the global flags' and
// the admin commands' env tags, and the worker's test-only handler switch.
var envNotConfig = []string{"JQ_ROLE", "JQ_CONFIG", "JQ_SERVER_ADDR", "JQ_TOKEN", "JQ_TOKEN_FILE"}

// preflight does what happens before a grammar is chosen: shell completion, `jq completion`,
// `jq help …`, the JSON-processor mix-up, a mistyped first word, and the warning about JQ_
// variables that name nothing. It returns the arguments to parse, or done with an exit code.
func preflight(args []string, environ []string, getenv func(string) string, stdio IO) (out []string, code int, done bool) {
	if line := getenv("COMP_LINE"); line != "" {
		// The shell asks for completions (`complete -C jq jq`): answer on stdout and nothing else.
		completeLine(line, getenv("COMP_POINT"), getenv, stdio.Stdout)
		return nil, ExitOK, true
	}
	if len(args) == 0 && stdinIsData(stdio.Stdin) {
		fmt.Fprintln(stdio.Stderr, "jq: input on stdin but no arguments: this jq is a job queue, not the JSON processor of the same name (run that one by its full path, e.g. /usr/bin/jq); `jq help` lists this one's commands")
		return nil, ExitUsage, true
	}
	for _, w := range config.UnknownEnv(environ, envNotConfig) {
		fmt.Fprintf(stdio.Stderr, "jq: warning: %s\n", w)
	}
	first, at := firstArgAt(args)
	switch first {
	case completionCommand:
		return nil, writeCompletionScript(args[at+1:], stdio), true
	case helpCommand:
		// `jq help job submit` is `jq job submit --help`.
		args = append(slices.Delete(slices.Clone(args), at, at+1), "--help")
		first, _ = firstArgAt(args)
	}
	if first == "" || adminCommands[first] || first == healthcheck.Command || looksLikeJSONFilter(first) {
		return args, 0, false
	}
	// Only a first word that leads the line, with no role given: `jq jbo list`. Elsewhere the word
	// may be a flag's value (--worker-id w1), which kong judges with the role's whole grammar.
	if args[0] == first && getenv("JQ_ROLE") == "" {
		// Only the admin grammar has commands; any other role would say "unexpected argument".
		msg := fmt.Sprintf("jq: unknown command %q", first)
		if owners := commandGroupsOf(first); len(owners) > 0 {
			// An operator word without its noun: `jq submit` is `jq job submit`.
			for i, g := range owners {
				owners[i] = fmt.Sprintf("%q", g+" "+first)
			}
			if len(owners) == 1 {
				msg += fmt.Sprintf(" (did you mean %s?)", owners[0])
			} else {
				msg += fmt.Sprintf(" (did you mean one of %s?)", strings.Join(owners, ", "))
			}
		} else if s := closest(first, operatorCommandNames()); s != "" {
			msg += fmt.Sprintf(" (did you mean %q?)", s)
		}
		fmt.Fprintln(stdio.Stderr, msg+"; `jq help` lists the commands")
		return nil, ExitUsage, true
	}
	return args, 0, false
}

// stdinIsData reports whether stdin is a pipe or a file, as in `echo '{}' | jq`; a terminal or
// /dev/null (a daemon's stdin) is not.
func stdinIsData(r io.Reader) bool {
	f, ok := r.(*os.File)
	if !ok || f == nil {
		return false
	}
	fi, err := f.Stat()
	if err != nil {
		return false
	}
	return fi.Mode()&os.ModeNamedPipe != 0 || fi.Mode().IsRegular()
}

// firstArgAt is firstArg with its index in args (-1 when there is none).
func firstArgAt(args []string) (string, int) {
	first := firstArg(args)
	if first == "" {
		return "", -1
	}
	for i, a := range args {
		if a == first && (i == 0 || !valueFlags[args[i-1]]) {
			return first, i
		}
	}
	return first, slices.Index(args, first)
}

// operatorCommand is one top-level command of the admin grammar, for `jq --help` of every role.
type operatorCommand struct{ name, help string }

// operatorCommands reads the admin command tree's top level from its struct tags, so the list in
// `jq --help` cannot drift from the grammar.
func operatorCommands() []operatorCommand {
	var out []operatorCommand
	t := reflect.TypeFor[admin.Commands]()
	for i := range t.NumField() {
		f := t.Field(i)
		if _, ok := f.Tag.Lookup("cmd"); !ok {
			continue
		}
		name := f.Tag.Get("name")
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		out = append(out, operatorCommand{name: name, help: f.Tag.Get("help")})
	}
	return out
}

// commandGroupsOf lists, in the order of `jq help`, the command groups that have a command named
// word (`list`: job, queue, worker, …).
func commandGroupsOf(word string) []string {
	parser, err := kong.New(grammar(Admin), kong.Name("jq"), kong.Exit(func(int) {}),
		kong.Vars{"version": buildinfo.Get().String(), "role": string(Admin)})
	if err != nil {
		return nil
	}
	var groups []string
	for _, g := range parser.Model.Children {
		for _, c := range g.Children {
			if c.Name == word && !c.Hidden && c.Type == kong.CommandNode {
				groups = append(groups, g.Name)
			}
		}
	}
	return groups
}

func operatorCommandNames() []string {
	names := []string{helpCommand, completionCommand}
	for _, c := range operatorCommands() {
		names = append(names, c.name)
	}
	return names
}

// operatorHelp is the section of `jq --help` (every role but admin, whose help lists them itself)
// that names the operator commands.
func operatorHelp() string {
	var b strings.Builder
	b.WriteString("\n\nOperator commands (an operator command implies --role=admin; `jq help <command>` shows its flags):\n")
	for _, c := range operatorCommands() {
		fmt.Fprintf(&b, "  %-10s %s\n", c.name, c.help)
	}
	fmt.Fprintf(&b, "  %-10s %s\n", helpCommand, "Show the help of jq or of a command: jq help job submit.")
	fmt.Fprintf(&b, "  %-10s %s", completionCommand, "Print a shell completion script: jq completion bash|zsh|fish.")
	return b.String()
}

// closest is the candidate nearest to s when it is close enough to be a typo; between equally
// near ones, one of the same length (a transposition rather than a dropped letter).
func closest(s string, candidates []string) string {
	best, bestD := "", 3
	for _, c := range candidates {
		d := typo.Distance(s, c, 0)
		if len(s) >= 2 && strings.HasPrefix(c, s) {
			d = min(d, 1) // "que" is queue, however short
		}
		if d < bestD || (d == bestD && best != "" && len(c) == len(s) && len(best) != len(s)) {
			best, bestD = c, d
		}
	}
	return best
}

// completionScripts register jq's own completion (`complete -C`: the shell runs jq with COMP_LINE
// set) — the protocol of posener/complete, which kongplete drives from the kong grammar.
var completionScripts = map[string]string{
	"bash": "complete -C %[1]s %[2]s\n",
	"zsh":  "autoload -U +X bashcompinit && bashcompinit\ncomplete -C %[1]s %[2]s\n",
	"fish": `function __complete_%[2]s
    set -lx COMP_LINE (commandline -cp)
    test -z (commandline -ct)
    and set COMP_LINE "$COMP_LINE "
    %[1]s
end
complete -f -c %[2]s -a "(__complete_%[2]s)"
`,
}

func writeCompletionScript(rest []string, stdio IO) int {
	shell, _ := firstArgAt(rest)
	script, ok := completionScripts[shell]
	if !ok && shell != "" {
		fmt.Fprintf(stdio.Stderr, "jq: completion for %q is not supported; the shells are bash, zsh and fish (e.g. source <(jq completion bash))\n", shell)
		return ExitUsage
	}
	if !ok {
		fmt.Fprintln(stdio.Stderr, "jq: completion needs a shell: jq completion bash|zsh|fish (e.g. source <(jq completion bash))")
		return ExitUsage
	}
	bin, err := os.Executable()
	if err != nil {
		bin = "jq"
	}
	fmt.Fprintf(stdio.Stdout, script, shellQuote(bin), "jq")
	return ExitOK
}

func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(unicode.IsLetter(r) || unicode.IsDigit(r) || strings.ContainsRune("/._-+", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// completeLine prints the completions of the word under the cursor of line, one per line.
func completeLine(line, point string, getenv func(string) string, w io.Writer) {
	var p int
	if _, err := fmt.Sscan(point, &p); err == nil && p >= 0 && p < len(line) {
		line = line[:p]
	}
	a := completionArgs(line)
	role, err := roleFromArgs(a.Completed, getenv)
	if err != nil {
		role = All
	}
	names := namePredictors(a.Completed, getenv)
	cmd, err := grammarCommand(role, names...)
	if err != nil {
		return
	}
	if role != Admin {
		// Without --role a line may still become an operator command: offer them too.
		adminCmd, err := grammarCommand(Admin, names...)
		if err != nil {
			return
		}
		for name, sub := range adminCmd.Sub {
			cmd.Sub[name] = sub
		}
		cmd.Sub[helpCommand] = complete.Command{Args: complete.PredictSet(operatorCommandNames()...)}
		cmd.Sub[completionCommand] = complete.Command{Args: complete.PredictSet("bash", "zsh", "fish")}
	}
	for _, option := range cmd.Predict(a) {
		if strings.HasPrefix(option, a.Last) {
			fmt.Fprintln(w, option)
		}
	}
}

// grammarCommand is the completion tree of a role's grammar.
func grammarCommand(role Name, opts ...kongplete.Option) (complete.Command, error) {
	parser, err := kong.New(grammar(role), kong.Name("jq"), kong.Exit(func(int) {}),
		kong.Vars{"version": buildinfo.Get().String(), "role": string(role)})
	if err != nil {
		return complete.Command{}, err
	}
	return kongplete.Command(parser, opts...)
}

// namePredictors complete queue, schedule, constraint and worker names (the grammar's predictor
// tags) with what the server knows: the server and credentials of the line being completed
// (--server-addr, --token-file, --tls-*), else of the environment (JQ_SERVER_ADDR, JQ_TOKEN, …).
// Each asks only when its word is completed, and offers nothing when the server does not answer.
func namePredictors(completed []string, getenv func(string) string) []kongplete.Option {
	g := admin.Globals{
		ServerAddr: getenv("JQ_SERVER_ADDR"), Token: getenv("JQ_TOKEN"), TokenFile: getenv("JQ_TOKEN_FILE"),
	}
	if g.ServerAddr == "" {
		g.ServerAddr = "localhost:50051"
	}
	flags := map[string]*string{
		"--server-addr": &g.ServerAddr, "--token-file": &g.TokenFile, "--tls-ca": &g.TLSCA, "--tls-cert": &g.TLSCert, "--tls-key": &g.TLSKey,
	}
	for i, w := range completed {
		if v, ok := flags[w]; ok && i+1 < len(completed) {
			*v = completed[i+1]
		}
	}
	if slices.Contains(completed, "--token-file") {
		g.Token = "" // the line's own credential wins over the environment's
	}
	var opts []kongplete.Option
	for _, kind := range []string{admin.NamesQueue, admin.NamesSchedule, admin.NamesConstraint, admin.NamesWorker} {
		opts = append(opts, kongplete.WithPredictor(kind, complete.PredictFunc(func(complete.Args) []string {
			return admin.Names(context.Background(), kind, g)
		})))
	}
	return opts
}

// completionArgs splits a command line as posener/complete does (its own parser is unexported):
// the words after the program name, the last one possibly incomplete.
func completionArgs(line string) complete.Args {
	parts := strings.Fields(line)
	if line != "" && unicode.IsSpace(rune(line[len(line)-1])) {
		parts = append(parts, "")
	}
	if n := len(parts); n > 0 {
		// `--flag=val` completes val.
		if k, v, ok := strings.Cut(parts[n-1], "="); ok {
			parts = append(parts[:n-1], k, v)
		}
	}
	var a complete.Args
	if len(parts) > 0 {
		a.All = parts[1:]
		a.Completed = a.All[:max(len(a.All)-1, 0)]
		a.Last = parts[len(parts)-1]
		if len(a.Completed) > 0 {
			a.LastCompleted = a.Completed[len(a.Completed)-1]
		}
	}
	return a
}

// missingArgHint says where the names a positional argument takes are listed, by the command group.
var missingArgHint = map[string]string{
	"job":        " (jq job list shows recent jobs)",
	"queue":      " (jq queue list shows the queues)",
	"schedule":   " (jq schedule list shows the schedules)",
	"constraint": " (jq constraint list shows the constraints)",
	"worker":     " (jq worker list shows the workers)",
	"peek":       " (jq queue list shows the queues)",
}

// usageText is the one line of a parse error. A command group given without its command (`jq
// job`) names every command of the group, where kong's message stops after five; a command given
// without its argument (`jq job status`) shows the command line it wants and where to find a value.
func usageText(err error) string {
	var pe *kong.ParseError
	if errors.As(err, &pe) && pe.Context != nil && strings.HasPrefix(err.Error(), "expected \"<") {
		var cmd *kong.Node
		for _, p := range pe.Context.Path {
			if p.Command != nil {
				cmd = p.Command
			}
		}
		if cmd != nil {
			arg := strings.TrimSuffix(strings.TrimPrefix(err.Error(), "expected \""), "\"")
			path := cmd.Path()
			group, _, _ := strings.Cut(path, " ")
			return fmt.Sprintf("%s needs %s: jq %s %s%s", path, arg, path, arg, missingArgHint[group])
		}
	}
	if errors.As(err, &pe) && pe.Context != nil && strings.HasPrefix(err.Error(), "expected one of ") {
		var group *kong.Node
		for _, p := range pe.Context.Path {
			if p.Command != nil {
				group = p.Command
			}
		}
		if group != nil && len(group.Children) > 0 {
			var names []string
			for _, c := range group.Children {
				if !c.Hidden && c.Argument == nil {
					names = append(names, c.Name)
				}
			}
			path := group.Path()
			return fmt.Sprintf("%s needs a command: %s (jq help %s)", path, strings.Join(names, ", "), path)
		}
	}
	return oneLine(err.Error())
}

// operatorUsage is the usage line of a role's help page that also lists the operator commands.
const operatorUsage = "Usage: jq [flags]\n       jq <operator command> [flags]\n"

// helpPrinter is kong's help, except that a role page listing the operator commands (every role
// but admin) says in its usage line that they are taken: kong knows only the role's own flags
// there and would print "Usage: jq [flags]" above them.
func helpPrinter(role Name) kong.HelpPrinter {
	return func(options kong.HelpOptions, ctx *kong.Context) error {
		if role == Admin || ctx.Selected() != nil {
			return kong.DefaultHelpPrinter(options, ctx)
		}
		var page bytes.Buffer
		out := ctx.Stdout
		ctx.Stdout = &page
		err := kong.DefaultHelpPrinter(options, ctx)
		ctx.Stdout = out
		if err != nil {
			return err
		}
		_, err = io.WriteString(out, strings.Replace(page.String(), "Usage: jq [flags]\n", operatorUsage, 1))
		return err
	}
}
