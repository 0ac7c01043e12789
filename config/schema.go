package config

import (
	"fmt"
	"reflect"
	"strings"
)

// leaf is one settable key, derived from the struct tree so the key set, the
// env names and the types can never drift from Config.
type leaf struct {
	path   string // "scheduler.batch_size"
	env    string // "JQ_SCHEDULER_BATCH_SIZE"
	typ    reflect.Type
	index  []int  // field index path from Config
	secret string // "" | "true" | "url" (value of the `secret` tag)
}

type schema struct {
	leaves   []leaf          // struct order
	byPath   map[string]int  // path -> leaves index
	byEnv    map[string]int  // env name -> leaves index
	sections map[string]bool // paths of nested structs ("kafka.producer")
}

const envPrefix = "JQ_"

var keys = buildSchema()

func buildSchema() *schema {
	s := &schema{
		byPath:   map[string]int{},
		byEnv:    map[string]int{},
		sections: map[string]bool{},
	}
	s.walk(reflect.TypeFor[Config](), "", nil)
	return s
}

func (s *schema) walk(t reflect.Type, prefix string, index []int) {
	for i := range t.NumField() {
		f := t.Field(i)
		name := f.Tag.Get("koanf")
		if name == "" {
			panic(fmt.Sprintf("config: field %s has no koanf tag", f.Name))
		}
		path := name
		if prefix != "" {
			path = prefix + "." + name
		}
		idx := append(append([]int(nil), index...), i)
		if f.Type.Kind() == reflect.Struct {
			s.sections[path] = true
			s.walk(f.Type, path, idx)
			continue
		}
		switch f.Type.Kind() {
		case reflect.String, reflect.Int, reflect.Bool, reflect.Float64:
		case reflect.Slice:
			if k := f.Type.Elem().Kind(); k != reflect.String && k != reflect.Struct {
				panic(fmt.Sprintf("config: %s: unsupported list type %s", path, f.Type))
			}
		default:
			panic(fmt.Sprintf("config: %s: unsupported type %s", path, f.Type))
		}
		l := leaf{
			path:   path,
			env:    EnvVar(path),
			typ:    f.Type,
			index:  idx,
			secret: f.Tag.Get("secret"),
		}
		if _, dup := s.byEnv[l.env]; dup {
			panic(fmt.Sprintf("config: %s: environment variable %s is ambiguous", path, l.env))
		}
		s.byPath[path] = len(s.leaves)
		s.byEnv[l.env] = len(s.leaves)
		s.leaves = append(s.leaves, l)
	}
}

func (s *schema) leaf(path string) (leaf, bool) {
	i, ok := s.byPath[path]
	if !ok {
		return leaf{}, false
	}
	return s.leaves[i], true
}

// flatten returns every leaf of c by key path.
func (s *schema) flatten(c *Config) map[string]any {
	v := reflect.ValueOf(c).Elem()
	out := make(map[string]any, len(s.leaves))
	for _, l := range s.leaves {
		fv := v.FieldByIndex(l.index)
		if ss, ok := fv.Interface().([]string); ok {
			out[l.path] = append([]string{}, ss...)
			continue
		}
		out[l.path] = fv.Interface()
	}
	return out
}

// Keys returns every configuration key path in declaration order.
func Keys() []string {
	out := make([]string, len(keys.leaves))
	for i, l := range keys.leaves {
		out[i] = l.path
	}
	return out
}

// EnvVar returns the environment variable that overrides key path
// ("db.password" → "JQ_DB_PASSWORD").
func EnvVar(path string) string {
	return envPrefix + strings.ToUpper(strings.ReplaceAll(path, ".", "_"))
}
