package handlers

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/jq-dev/jq/queue"
)

// envName is the shape of a variable a payload may set: a shell identifier. It excludes the
// names bash gives exported functions (BASH_FUNC_name%%), which run code in every bash started
// with them, and anything with '=', NUL or spaces.
var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// interpreterHooks are variables that make a program, its loader or an interpreter it starts
// load or run code named by the variable: setting one turns an allowed wrapper script into
// "run anything". They are refused even when worker.exec.env_allow lists them.
var interpreterHooks = []string{
	// shells
	"BASH_ENV", "ENV", "SHELLOPTS", "BASHOPTS", "PS4", "PROMPT_COMMAND", "IFS", "CDPATH", "GLOBIGNORE",
	// Perl, Python, Ruby, Node, Java, PHP, Lua, Tcl
	"PERL5OPT", "PERL5LIB", "PERLLIB", "PERL5DB", "PERL_MB_OPT",
	"PYTHONPATH", "PYTHONSTARTUP", "PYTHONHOME", "PYTHONUSERBASE", "PYTHONINSPECT", "PYTHONBREAKPOINT",
	"RUBYOPT", "RUBYLIB", "NODE_OPTIONS", "NODE_PATH",
	"JAVA_TOOL_OPTIONS", "_JAVA_OPTIONS", "JDK_JAVA_OPTIONS", "CLASSPATH",
	"PHPRC", "PHP_INI_SCAN_DIR", "LUA_INIT", "LUA_PATH", "LUA_CPATH", "TCLLIBPATH",
	// the dynamic loader and the C library
	"GCONV_PATH", "LOCPATH", "NLSPATH", "HOSTALIASES", "MALLOC_TRACE", "RESOLV_HOST_CONF",
	// tools that wrapper scripts commonly call, each of which runs a command named by a variable
	"GIT_SSH", "GIT_SSH_COMMAND", "GIT_EXEC_PATH", "GIT_CONFIG_GLOBAL", "GIT_CONFIG_SYSTEM", "EDITOR", "VISUAL", "PAGER",
}

// hookPrefixes are families of such variables.
var hookPrefixes = []string{"LD_", "DYLD_", "BASH_FUNC_", "PYTHON", "PERL", "NODE_", "RUBY", "GIT_CONFIG_"}

// ExecEnvRefused says why a payload may never set variable k, whatever worker.exec.env_allow
// lists; nil when it may be allowed.
func ExecEnvRefused(k string) error {
	if !envName.MatchString(k) {
		return fmt.Errorf("%s is not a variable name (letters, digits and _)", queue.Excerpt(k))
	}
	if slices.Contains(interpreterHooks, k) || slices.ContainsFunc(hookPrefixes, func(p string) bool { return strings.HasPrefix(k, p) }) {
		return fmt.Errorf("%s is an interpreter hook: it makes a program load or run code it names", k)
	}
	return nil
}

// envAllowed reports whether the operator lists k: by name, or by a prefix given as "NAME_*".
func envAllowed(allow []string, k string) bool {
	for _, a := range allow {
		if p, ok := strings.CutSuffix(a, "*"); ok && strings.HasPrefix(k, p) || a == k {
			return true
		}
	}
	return false
}
