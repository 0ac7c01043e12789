package config

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"net/url"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/knadh/koanf/parsers/yaml"
	"github.com/knadh/koanf/providers/confmap"
	"github.com/knadh/koanf/providers/file"
	"github.com/knadh/koanf/v2"

	"github.com/jq-dev/jq/internal/typo"
)

// LoadOptions are the layers Load merges over Default, lowest first.
type LoadOptions struct {
	// File is a YAML config file; "" means none. A named file must exist.
	File string
	// Environ is the environment in os.Environ form ("K=V"); nil means none.
	// Only JQ_ variables that name a known key are read; others are ignored.
	Environ []string
	// Flags maps key paths to values of flags the user set explicitly.
	// An unknown key path is a programming error and fails Load.
	Flags map[string]any
	// Production reports whether the merged configuration runs in production (the caller knows
	// which listeners its role opens: any on a non-loopback address). Then a secret in the file
	// is a problem naming the key and the environment variable to use (FR-045: never read from
	// the file in production); otherwise, and when nil, it is a warning (local development).
	Production func(*Config) bool
}

// Load merges Default, the file, the environment and the flags (each
// overriding the one before), validates the result once and returns it with
// warnings for the caller to log (FR-045: secrets found in the file, refused
// instead in production, LoadOptions.Production).
//
// Problems with values — a wrong type in any layer, an unknown key in the
// file, a failed Validate rule — are all reported together in one
// errors.Join of *FieldError, one line each starting with the key path (and
// the source when the value could not be read); it matches ErrInvalid. A
// missing or unreadable file, YAML syntax errors and unknown flag keys are
// returned on their own and do not match ErrInvalid.
func Load(opts LoadOptions) (*Config, []string, error) {
	k := koanf.New(".")
	def := Default()
	if err := k.Load(confmap.Provider(keys.flatten(&def), "."), nil); err != nil {
		return nil, nil, fmt.Errorf("config: load defaults: %w", err)
	}

	var (
		problems []error
		secrets  []fileSecret
	)
	merge := func(layer map[string]any) error {
		if len(layer) == 0 {
			return nil
		}
		return k.Load(confmap.Provider(layer, "."), nil)
	}

	if opts.File != "" {
		layer, sec, probs, err := fileLayer(opts.File)
		if err != nil {
			return nil, nil, err
		}
		secrets, problems = sec, append(problems, probs...)
		if err := merge(layer); err != nil {
			return nil, nil, fmt.Errorf("config: merge %s: %w", opts.File, err)
		}
	}

	layer, probs := envLayer(opts.Environ)
	problems = append(problems, probs...)
	if err := merge(layer); err != nil {
		return nil, nil, fmt.Errorf("config: merge environment: %w", err)
	}

	layer, probs, err := flagLayer(opts.Flags)
	if err != nil {
		return nil, nil, err
	}
	problems = append(problems, probs...)
	if err := merge(layer); err != nil {
		return nil, nil, fmt.Errorf("config: merge flags: %w", err)
	}

	var cfg Config
	if err := k.UnmarshalWithConf("", &cfg, koanf.UnmarshalConf{Tag: "koanf"}); err != nil {
		return nil, nil, fmt.Errorf("config: decode: %w", err)
	}
	cfg.applyPortOffset()
	problems = append(problems, cfg.problems()...)
	var warnings []string
	if len(secrets) > 0 && opts.Production != nil && opts.Production(&cfg) {
		for _, sec := range secrets {
			problems = append(problems, &FieldError{Key: sec.key, Source: "file " + opts.File, Msg: sec.refusal})
		}
	} else {
		for _, sec := range secrets {
			warnings = append(warnings, sec.warning)
		}
	}
	if len(problems) > 0 {
		return nil, warnings, errors.Join(problems...)
	}
	return &cfg, warnings, nil
}

// fileLayer reads path and returns its values by key path, typed like the
// Config fields. YAML null means "not set".
func fileLayer(path string) (layer map[string]any, secrets []fileSecret, problems []error, err error) {
	fk := koanf.New(".")
	if err = fk.Load(file.Provider(path), yaml.Parser()); err != nil {
		if _, ok := errors.AsType[*fs.PathError](err); ok {
			return nil, nil, nil, fmt.Errorf("config: %w", err)
		}
		return nil, nil, nil, fmt.Errorf("config: parse %s: %w", path, err)
	}
	src := "file " + path
	raw := fk.All()
	paths := make([]string, 0, len(raw))
	for p := range raw {
		paths = append(paths, p)
	}
	slices.Sort(paths)

	layer = map[string]any{}
	mistyped := map[string]bool{}
	for _, p := range paths {
		v := raw[p]
		if v == nil {
			continue
		}
		l, ok := keys.leaf(p)
		if !ok {
			if prob := unknownFileKey(p, v, src, mistyped); prob != nil {
				problems = append(problems, prob)
			}
			continue
		}
		tv, msg := coerce(l.typ, v)
		if msg != "" {
			problems = append(problems, &FieldError{Key: p, Source: src, Msg: msg})
			continue
		}
		layer[p] = tv
		if sec, ok := secretIn(l, tv); ok {
			secrets = append(secrets, sec)
		}
	}
	return layer, secrets, problems, nil
}

func unknownFileKey(p string, v any, src string, mistyped map[string]bool) error {
	if keys.sections[p] {
		if m, ok := v.(map[string]any); ok && len(m) == 0 {
			return nil
		}
		return &FieldError{Key: p, Source: src, Msg: "expected a mapping of keys, got " + describe(v)}
	}
	// A mapping where a scalar belongs flattens to keys below a known leaf.
	for i := strings.LastIndexByte(p, '.'); i > 0; i = strings.LastIndexByte(p[:i], '.') {
		if l, ok := keys.leaf(p[:i]); ok {
			if mistyped[l.path] {
				return nil
			}
			mistyped[l.path] = true
			return &FieldError{Key: l.path, Source: src, Msg: "expected " + typeName(l.typ) + ", got a mapping"}
		}
	}
	msg := "unknown key"
	if s := suggest(p); s != "" {
		msg += " (did you mean " + s + "?)"
	}
	key := p
	if !plainKeyRE.MatchString(key) {
		key = strconv.Quote(key) // keep odd keys visible and on one line
	}
	return &FieldError{Key: key, Source: src, Msg: msg}
}

var plainKeyRE = regexp.MustCompile(`^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$`)

// fileSecret is a secret found in the config file: a warning in local development, a refusal in
// production.
type fileSecret struct {
	key, warning, refusal string
}

// production is how a refusal names the rule.
const production = "a non-loopback listener means production, where secrets are never read from the config file (FR-045)"

func secretIn(l leaf, v any) (fileSecret, bool) {
	s, _ := v.(string)
	switch {
	case l.secret == "true" && s != "":
		return fileSecret{key: l.path,
			warning: fmt.Sprintf("config: %s is set in the config file; provide secrets with %s instead", l.path, l.env),
			refusal: fmt.Sprintf("is set in the config file: %s; remove it and set %s instead", production, l.env),
		}, true
	case l.secret == "url" && urlHasPassword(s):
		return fileSecret{key: l.path,
			warning: fmt.Sprintf("config: %s in the config file contains a password; provide secrets with %s (or the whole URL with %s) instead",
				l.path, EnvVar("db.password"), l.env),
			refusal: fmt.Sprintf("contains a password in the config file: %s; remove the password and set %s (or the whole URL with %s) instead",
				production, EnvVar("db.password"), l.env),
		}, true
	}
	return fileSecret{}, false
}

func urlHasPassword(s string) bool {
	u, err := url.Parse(s)
	if err != nil {
		return false
	}
	if u.User != nil {
		if p, ok := u.User.Password(); ok && p != "" {
			return true
		}
	}
	return u.Query().Get("password") != ""
}

// envLayer picks the JQ_ variables that name a known key. An empty value is
// treated as unset (the compose idiom JQ_X=${JQ_X:-}); when a name repeats,
// the first occurrence wins, as with os.Getenv.
func envLayer(environ []string) (map[string]any, []error) {
	layer := map[string]any{}
	seen := map[string]bool{}
	var problems []error
	for _, kv := range environ {
		name, val, ok := strings.Cut(kv, "=")
		if !ok || !strings.HasPrefix(name, envPrefix) || seen[name] {
			continue
		}
		seen[name] = true
		i, ok := keys.byEnv[name]
		if !ok || val == "" {
			continue
		}
		l := keys.leaves[i]
		tv, msg := coerce(l.typ, val)
		if msg != "" {
			problems = append(problems, &FieldError{Key: l.path, Source: "env " + name, Msg: msg})
			continue
		}
		layer[l.path] = tv
	}
	return layer, problems
}

func flagLayer(flags map[string]any) (map[string]any, []error, error) {
	layer := map[string]any{}
	var problems []error
	paths := make([]string, 0, len(flags))
	for p := range flags {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	for _, p := range paths {
		l, ok := keys.leaf(p)
		if !ok {
			return nil, nil, fmt.Errorf("config: unknown flag key %q", p)
		}
		v := flags[p]
		if v == nil {
			continue
		}
		tv, msg := coerce(l.typ, v)
		if msg != "" {
			problems = append(problems, &FieldError{Key: p, Source: "flag", Msg: msg})
			continue
		}
		layer[p] = tv
	}
	return layer, problems, nil
}

// coerce converts v to t's kind. Strings are parsed (env values are always
// strings); lists may be given as comma-separated strings. It returns a
// problem description instead of an error so callers can attach the key and
// source.
func coerce(t reflect.Type, v any) (any, string) {
	bad := "expected " + typeName(t) + ", got " + describe(v)
	if _, ok := v.(time.Duration); ok {
		return nil, bad + " (give a whole number in the unit of the key name)"
	}
	rv := reflect.ValueOf(v)
	switch t.Kind() {
	case reflect.Int:
		switch {
		case rv.Kind() == reflect.String:
			n, err := strconv.ParseInt(strings.TrimSpace(rv.String()), 10, strconv.IntSize)
			if err != nil {
				return nil, bad
			}
			return int(n), ""
		case rv.CanInt():
			return int(rv.Int()), ""
		case rv.CanUint() && rv.Uint() <= math.MaxInt:
			return int(rv.Uint()), "" //nolint:gosec // ≤ math.MaxInt, checked above
		case rv.CanFloat():
			f := rv.Float()
			if f == math.Trunc(f) && f >= math.MinInt && f < math.MaxInt {
				return int(f), ""
			}
		}
	case reflect.Float64:
		var f float64
		switch {
		case rv.Kind() == reflect.String:
			var err error
			if f, err = strconv.ParseFloat(strings.TrimSpace(rv.String()), 64); err != nil {
				return nil, bad
			}
		case rv.CanFloat():
			f = rv.Float()
		case rv.CanInt():
			f = float64(rv.Int())
		case rv.CanUint():
			f = float64(rv.Uint())
		default:
			return nil, bad
		}
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return nil, bad
		}
		return f, ""
	case reflect.Bool:
		switch {
		case rv.Kind() == reflect.Bool:
			return rv.Bool(), ""
		case rv.Kind() == reflect.String:
			switch strings.ToLower(strings.TrimSpace(rv.String())) {
			case "1", "t", "true", "yes", "y", "on":
				return true, ""
			case "0", "f", "false", "no", "n", "off":
				return false, ""
			}
		}
	case reflect.String:
		if s, ok := scalarString(v); ok {
			return s, ""
		}
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Struct {
			return coerceStructList(t, v)
		}
		switch x := v.(type) {
		case string:
			return splitList(x), ""
		case []string:
			return append([]string{}, x...), ""
		case []any:
			out := make([]string, 0, len(x))
			for _, e := range x {
				s, ok := scalarString(e)
				if !ok {
					return nil, "expected " + typeName(t) + ", got a list containing " + describe(e)
				}
				out = append(out, s)
			}
			return out, ""
		}
	}
	return nil, bad
}

func scalarString(v any) (string, bool) {
	switch x := v.(type) {
	case string:
		return x, true
	case bool, int, int64, uint64, float64:
		return fmt.Sprint(x), true
	}
	return "", false
}

func splitList(s string) []string {
	out := []string{}
	for part := range strings.SplitSeq(s, ",") {
		if part = strings.TrimSpace(part); part != "" {
			out = append(out, part)
		}
	}
	return out
}

func typeName(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Int:
		return "an integer"
	case reflect.Float64:
		return "a number"
	case reflect.Bool:
		return "true or false"
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Struct {
			return "a list of mappings"
		}
		return "a list of strings"
	default:
		return "a string"
	}
}

func describe(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case string:
		return strconv.Quote(x)
	case map[string]any:
		return "a mapping"
	case []any, []string:
		return "a list"
	case time.Duration:
		return "the duration " + x.String()
	}
	switch reflect.ValueOf(v).Kind() {
	case reflect.Map:
		return "a mapping"
	case reflect.Slice, reflect.Array:
		return "a list"
	case reflect.Struct, reflect.Pointer, reflect.Func, reflect.Chan:
		return fmt.Sprintf("a value of type %T", v)
	}
	return fmt.Sprint(v)
}

// suggest returns the known key closest to an unknown one, if it is close
// enough to be a typo.
func suggest(p string) string {
	best, bestD := "", 3
	for _, l := range keys.leaves {
		if d := typo.Distance(p, l.path, bestD); d < bestD {
			best, bestD = l.path, d
		}
	}
	return best
}
