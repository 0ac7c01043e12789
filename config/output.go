package config

import (
	"bytes"
	"fmt"
	"net/url"
	"reflect"

	"go.yaml.in/yaml/v3"
)

// RedactedMarker is the marker that replaces a non-empty secret.
const RedactedMarker = "[REDACTED]"

// urlRedacted replaces a password inside db.url; brackets are not valid in a
// URL's userinfo and the result must stay a parseable URL.
const urlRedacted = "REDACTED"

// Redacted returns a deep copy of c with every non-empty secret replaced by
// "[REDACTED]" and the password inside db.url replaced by "REDACTED".
func (c *Config) Redacted() Config {
	out := *c
	v := reflect.ValueOf(&out).Elem()
	for _, l := range keys.leaves {
		f := v.FieldByIndex(l.index)
		switch {
		case f.Kind() == reflect.Slice && f.Type().Elem().Kind() == reflect.String:
			f.Set(reflect.ValueOf(append([]string(nil), f.Interface().([]string)...)))
		case f.Kind() == reflect.Slice:
			f.Set(reflect.AppendSlice(reflect.MakeSlice(f.Type(), 0, f.Len()), f))
		case l.secret == "true" && f.String() != "":
			f.SetString(RedactedMarker)
		case l.secret == "url":
			f.SetString(redactURL(f.String()))
		}
	}
	return out
}

func redactURL(s string) string {
	if s == "" {
		return ""
	}
	u, err := url.Parse(s)
	if err != nil {
		return RedactedMarker
	}
	if u.User != nil {
		if _, has := u.User.Password(); has {
			u.User = url.UserPassword(u.User.Username(), urlRedacted)
		}
	}
	if q := u.Query(); q.Has("password") {
		q.Set("password", urlRedacted)
		u.RawQuery = q.Encode()
	}
	return u.String()
}

// YAML renders c as a config file in declaration order, with the same
// snake_case keys Load reads, so the output can be loaded again. It prints
// secrets as they are; print c.Redacted() for humans.
func (c *Config) YAML() ([]byte, error) {
	// The ports already include port_offset: printed as 0, loading the output again moves nothing twice.
	cp := *c
	cp.PortOffset = 0
	root, err := yamlNode(reflect.ValueOf(&cp).Elem())
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(root); err != nil {
		return nil, fmt.Errorf("config: encode yaml: %w", err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("config: encode yaml: %w", err)
	}
	return buf.Bytes(), nil
}

func yamlNode(v reflect.Value) (*yaml.Node, error) {
	n := &yaml.Node{Kind: yaml.MappingNode}
	t := v.Type()
	for i := range t.NumField() {
		key := &yaml.Node{Kind: yaml.ScalarNode, Value: t.Field(i).Tag.Get("koanf")}
		var val *yaml.Node
		if f := v.Field(i); f.Kind() == reflect.Struct {
			var err error
			if val, err = yamlNode(f); err != nil {
				return nil, err
			}
		} else if f.Kind() == reflect.Slice && f.Len() == 0 {
			// A nil list would print as null, which Load reads as "not set".
			val = &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq", Style: yaml.FlowStyle}
		} else {
			val = &yaml.Node{}
			if err := val.Encode(f.Interface()); err != nil {
				return nil, fmt.Errorf("config: encode %s: %w", key.Value, err)
			}
		}
		n.Content = append(n.Content, key, val)
	}
	return n, nil
}
