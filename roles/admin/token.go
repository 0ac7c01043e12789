package admin

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/jq-dev/jq/api/auth"
)

// TokenCmd groups the token commands.
type TokenCmd struct {
	New TokenNewCmd `cmd:"" help:"Issue a new API token: prints the token (give it to the client) and the auth.tokens entry, which holds only its hash (give it to the servers)."`
}

// TokenNewCmd is `token new`.
type TokenNewCmd struct {
	Name   string   `help:"Name of the principal (logs, metrics, ownership of workers and jobs)." required:""`
	Roles  []string `help:"Roles: producer, worker, viewer, admin (comma-separated)." required:"" sep:","`
	Queues []string `help:"Queues the principal may use (workers: take jobs from; producers: submit to); default all." sep:","`
}

// Run issues the token. It runs offline: the server learns the hash from its configuration.
func (c *TokenNewCmd) Run(re *runEnv) error {
	roles := make([]auth.Role, 0, len(c.Roles))
	for _, r := range c.Roles {
		role, err := auth.ParseRole(r)
		if err != nil {
			return usagef("--roles: %v", err)
		}
		roles = append(roles, role)
	}
	tok, err := auth.NewToken()
	if err != nil {
		return err
	}
	entry := auth.TokenEntry{Name: c.Name, Roles: roles, SHA256: auth.HashToken(tok), Queues: c.Queues}
	// Round-trip through the parser: what is printed is exactly what a server accepts.
	if _, err := auth.ParseTokenEntry(entry.String()); err != nil {
		return usagef("%v", err)
	}
	switch re.globals.Output {
	case "json", "yaml":
		b, err := json.MarshalIndent(map[string]string{"name": c.Name, "token": tok, "auth_tokens_entry": entry.String()}, "", "  ")
		if err != nil {
			return err
		}
		_, err = fmt.Fprintln(re.Stdout, string(b))
		return err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "token:             %s\n", tok)
	fmt.Fprintf(&b, "auth.tokens entry: %s\n", entry)
	b.WriteString("\nThe token is shown once: give it to the client (JQ_TOKEN or --token-file).\n")
	b.WriteString("Add the entry to the servers' auth.tokens (JQ_AUTH_TOKENS, comma-separated) or auth.tokens_file.\n")
	_, err = fmt.Fprint(re.Stdout, b.String())
	return err
}
