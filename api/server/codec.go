package apiserver

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/jq-dev/jq/api/codec"
	"github.com/jq-dev/jq/queue"
)

// jsonCodec replaces connect's JSON codec (Connect and gRPC-Web with JSON). It writes and reads
// bytes fields holding JSON as JSON values (codec.MarshalJSON: "payload": {"a":1}). Like connect's, it ignores
// unknown fields, so a newer client can talk to an older server. Unlike it, it refuses an enum
// value name the schema does not know: protojson's DiscardUnknown drops such a value silently, and
// ListJobs with states ["JOB_STATE_BOGUS"] would list every state. Numeric enum values are kept by
// every codec and checked by the handler (listParams). Its errors are one short line: protojson's
// own messages quote the offending token whole.
type jsonCodec struct{ name string }

// codecs are the handler options that install jsonCodec under both names connect serves JSON
// with, and the MessagePack codec (application/msgpack).
func codecs() []connect.HandlerOption {
	return []connect.HandlerOption{
		connect.WithCodec(protoCodec{}),
		connect.WithCodec(jsonCodec{name: "json"}),
		connect.WithCodec(jsonCodec{name: "json; charset=utf-8"}),
		connect.WithCodec(codec.MsgPack{}),
	}
}

func (c jsonCodec) Name() string { return c.name }

func (jsonCodec) IsBinary() bool { return false }

func (jsonCodec) Marshal(msg any) ([]byte, error) {
	m, ok := msg.(proto.Message)
	if !ok {
		return nil, fmt.Errorf("%T is not a protobuf message", msg)
	}
	return codec.MarshalJSON(protojson.MarshalOptions{}, m)
}

func (jsonCodec) MarshalAppend(dst []byte, msg any) ([]byte, error) {
	m, ok := msg.(proto.Message)
	if !ok {
		return nil, fmt.Errorf("%T is not a protobuf message", msg)
	}
	b, err := codec.MarshalJSON(protojson.MarshalOptions{}, m)
	if err != nil {
		return nil, err
	}
	return append(dst, b...), nil
}

func (jsonCodec) Unmarshal(data []byte, msg any) error {
	m, ok := msg.(proto.Message)
	if !ok {
		return fmt.Errorf("%T is not a protobuf message", msg)
	}
	if len(data) == 0 {
		return errors.New("malformed JSON request: empty body (want a JSON object)")
	}
	data = codec.ValuesAsBytes(data, m.ProtoReflect().Descriptor())
	// The common case, a request this server fully understands, decodes once.
	if protojson.Unmarshal(data, m) == nil {
		return nil
	}
	// Something is unknown or malformed: decode as connect does, then look for enum names.
	proto.Reset(m)
	if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(data, m); err != nil {
		return fmt.Errorf("malformed JSON request: %s", excerptError(err))
	}
	return checkEnumNames(data, m.ProtoReflect().Descriptor())
}

// excerptError shortens a decoder's message, which may quote the whole offending input.
func excerptError(err error) string {
	s := firstLine(err.Error())
	if len(s) > 2*queue.MaxExcerpt {
		return strings.TrimSuffix(strings.TrimPrefix(queue.Excerpt(s), `"`), `"…`) + "…"
	}
	return s
}

// checkEnumNames walks a JSON request along its message descriptor and refuses the first enum
// value given by a name the enum does not have. Unknown fields are skipped, as protojson with
// DiscardUnknown does; the well-known types (Duration, Timestamp, ...) have JSON forms of their
// own and hold no enum of jq's, so they are skipped too.
func checkEnumNames(data []byte, md protoreflect.MessageDescriptor) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return fmt.Errorf("malformed JSON request: %s", excerptError(err))
	}
	return walkEnums(v, md, "")
}

func walkEnums(v any, md protoreflect.MessageDescriptor, path string) error {
	obj, ok := v.(map[string]any)
	if !ok || strings.HasPrefix(string(md.FullName()), "google.protobuf.") {
		return nil
	}
	fields := md.Fields()
	for name, fv := range obj {
		fd := fields.ByJSONName(name)
		if fd == nil {
			fd = fields.ByTextName(name)
		}
		if fd == nil {
			continue
		}
		at := path + string(fd.Name())
		switch {
		case fd.IsList():
			list, _ := fv.([]any)
			for i, e := range list {
				if err := checkEnumValue(e, fd, fmt.Sprintf("%s[%d]", at, i)); err != nil {
					return err
				}
			}
		case fd.IsMap():
			entries, _ := fv.(map[string]any)
			for _, e := range entries {
				if err := checkEnumValue(e, fd.MapValue(), at+"{}"); err != nil {
					return err
				}
			}
		default:
			if err := checkEnumValue(fv, fd, at); err != nil {
				return err
			}
		}
	}
	return nil
}

func checkEnumValue(v any, fd protoreflect.FieldDescriptor, at string) error {
	switch fd.Kind() {
	case protoreflect.EnumKind:
		if s, ok := v.(string); ok && fd.Enum().Values().ByName(protoreflect.Name(s)) == nil {
			return invalid(fmt.Sprintf("%s: %s is not a value of %s", at, queue.Excerpt(s), fd.Enum().Name()))
		}
	case protoreflect.MessageKind, protoreflect.GroupKind:
		return walkEnums(v, fd.Message(), at+".")
	}
	return nil
}
