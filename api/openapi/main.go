// Command protoc-gen-jq-openapi is the buf plugin that writes api/gen/openapi/jq.openapi.yaml. It
// runs protoc-gen-connect-openapi (a Go tool of tools/go.mod) with the same request and options,
// then adds what that plugin cannot express (see postProcess):
//
//   - application/msgpack next to application/json for every request and success response (errors
//     stay JSON, as the Connect protocol has them);
//   - the bytes fields' schemas say what jq accepts (api/codec): a base64 string or any other JSON
//     value in JSON, bin or any other value in MessagePack;
//   - the Connect-Protocol-Version header is optional, as jq's server does not require it;
//   - no OpenAPI 3.0 "nullable" keyword in this 3.1 document (optional fields say "null" in type);
//   - an error detail's "debug" is a plain object: the plugin's oneOf with a discriminator on "type"
//     refuses what Connect writes there (the detail's fields, such as ErrorInfo's reason and domain).
//
// buf.gen.yaml runs it as a local plugin (`go run ./api/openapi`) from the module root.
package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"

	"go.yaml.in/yaml/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/pluginpb"
)

func main() {
	if err := run(context.Background(), os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "protoc-gen-jq-openapi:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, stdin io.Reader, stdout io.Writer) error {
	req, err := io.ReadAll(stdin)
	if err != nil {
		return err
	}
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, "go", "tool", "-modfile=tools/go.mod", "protoc-gen-connect-openapi")
	cmd.Stdin, cmd.Stdout, cmd.Stderr = bytes.NewReader(req), &out, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("protoc-gen-connect-openapi: %w", err)
	}
	var resp pluginpb.CodeGeneratorResponse
	if err := proto.Unmarshal(out.Bytes(), &resp); err != nil {
		return err
	}
	if resp.Error == nil {
		for _, f := range resp.File {
			if !strings.HasSuffix(f.GetName(), ".yaml") {
				continue
			}
			doc, err := postProcess([]byte(f.GetContent()))
			if err != nil {
				return fmt.Errorf("%s: %w", f.GetName(), err)
			}
			f.Content = proto.String(string(doc))
		}
	}
	b, err := proto.Marshal(&resp)
	if err != nil {
		return err
	}
	_, err = stdout.Write(b)
	return err
}

const (
	jsonType    = "application/json"
	msgpackType = "application/msgpack"
)

// bytesDescription is appended to the description of every bytes field.
const bytesDescription = "\n\nIn JSON: a base64 string, or any other JSON value (object, array, number, boolean) " +
	"standing for its own JSON text; written as a JSON value when the bytes are one (docs/api.md, " +
	"\"JSON payloads\"). In MessagePack: bin, or any other value standing for its own MessagePack encoding; " +
	"always written as bin."

// postProcess edits the generated OpenAPI document (YAML).
func postProcess(src []byte) ([]byte, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(src, &doc); err != nil {
		return nil, err
	}
	if len(doc.Content) != 1 {
		return nil, fmt.Errorf("not a YAML document")
	}
	root := doc.Content[0]
	for _, item := range values(get(root, "paths")) {
		for _, op := range values(item) {
			addMsgPack(get(get(op, "requestBody"), "content"))
			addMsgPack(get(get(get(op, "responses"), "200"), "content"))
			for _, p := range elements(get(op, "parameters")) {
				if scalar(get(p, "name")) == "Connect-Protocol-Version" {
					set(p, "required", &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!bool", Value: "false"})
				}
			}
		}
	}
	for _, schema := range values(get(get(root, "components"), "schemas")) {
		for _, prop := range values(get(schema, "properties")) {
			// proto3 optional fields come out with a 3.1 type list holding "null" and the 3.0
			// keyword nullable as well, which 3.1 validators refuse.
			del(prop, "nullable")
			if scalar(get(prop, "type")) == "string" && scalar(get(prop, "format")) == "byte" {
				bytesField(prop)
			}
			if items := get(prop, "items"); scalar(get(items, "type")) == "string" && scalar(get(items, "format")) == "byte" {
				bytesField(items)
			}
		}
	}
	if debug := get(get(get(get(root, "components"), "schemas"), "connect.error_details.Any"), "properties"); get(debug, "debug") != nil {
		plain := &yaml.Node{Kind: yaml.MappingNode}
		set(plain, "type", &yaml.Node{Kind: yaml.ScalarNode, Value: "object"})
		set(plain, "additionalProperties", &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!bool", Value: "true"})
		set(plain, "title", &yaml.Node{Kind: yaml.ScalarNode, Value: "Debug"})
		set(plain, "description", &yaml.Node{Kind: yaml.ScalarNode, Value: "The detail's fields as JSON, for reading; " +
			"clients decode value. jq's errors carry a google.rpc.ErrorInfo (reason, domain jq.dev; docs/api.md, \"Errors\")."})
		set(debug, "debug", plain)
	}
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(&doc); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// addMsgPack adds application/msgpack after application/json in a content map, same schema.
func addMsgPack(content *yaml.Node) {
	if content == nil || get(content, msgpackType) != nil {
		return
	}
	for i := 0; i+1 < len(content.Content); i += 2 {
		if content.Content[i].Value == jsonType {
			key := &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: msgpackType}
			content.Content = append(content.Content[:i+2],
				append([]*yaml.Node{key, content.Content[i+1]}, content.Content[i+2:]...)...)
			return
		}
	}
}

// bytesField rewrites the schema of a bytes field, {type: string, format: byte}, into an anyOf
// of that and the non-string JSON values.
func bytesField(prop *yaml.Node) {
	del(prop, "type")
	del(prop, "format")
	str := &yaml.Node{Kind: yaml.MappingNode}
	set(str, "type", &yaml.Node{Kind: yaml.ScalarNode, Value: "string"})
	set(str, "format", &yaml.Node{Kind: yaml.ScalarNode, Value: "byte"})
	types := &yaml.Node{Kind: yaml.SequenceNode, Style: yaml.FlowStyle}
	for _, t := range []string{"object", "array", "number", "boolean"} {
		types.Content = append(types.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: t})
	}
	value := &yaml.Node{Kind: yaml.MappingNode}
	set(value, "type", types)
	set(prop, "anyOf", &yaml.Node{Kind: yaml.SequenceNode, Content: []*yaml.Node{str, value}})
	if d := get(prop, "description"); d != nil {
		d.Value += bytesDescription
		d.Style = yaml.LiteralStyle
	} else {
		set(prop, "description", &yaml.Node{Kind: yaml.ScalarNode, Value: strings.TrimSpace(bytesDescription)})
	}
}

// get returns the value of key in mapping node m (nil when absent or m is nil).
func get(m *yaml.Node, key string) *yaml.Node {
	if m == nil || m.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i+1]
		}
	}
	return nil
}

// set sets key in mapping node m, in place when present, else at the end.
func set(m *yaml.Node, key string, v *yaml.Node) {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			m.Content[i+1] = v
			return
		}
	}
	m.Content = append(m.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: key}, v)
}

func del(m *yaml.Node, key string) {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			m.Content = append(m.Content[:i], m.Content[i+2:]...)
			return
		}
	}
}

// values returns the values of mapping node m in order.
func values(m *yaml.Node) []*yaml.Node {
	if m == nil || m.Kind != yaml.MappingNode {
		return nil
	}
	var out []*yaml.Node
	for i := 1; i < len(m.Content); i += 2 {
		out = append(out, m.Content[i])
	}
	return out
}

func elements(s *yaml.Node) []*yaml.Node {
	if s == nil || s.Kind != yaml.SequenceNode {
		return nil
	}
	return s.Content
}

func scalar(n *yaml.Node) string {
	if n == nil || n.Kind != yaml.ScalarNode {
		return ""
	}
	return n.Value
}
