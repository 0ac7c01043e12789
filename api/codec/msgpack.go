package codec

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/vmihailenco/msgpack/v5"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// MsgPackName is the connect codec name of MsgPack: Content-Type application/msgpack (unary
// Connect), application/connect+msgpack (streaming Connect), application/grpc+msgpack.
const MsgPackName = "msgpack"

// MsgPack is a connect codec that encodes protobuf messages as MessagePack, walking them with
// protoreflect (see the package comment for the mapping). Generated structs cannot be handed to
// a reflection-based MessagePack library: their oneofs are interfaces it cannot fill.
type MsgPack struct{}

// Name implements connect.Codec.
func (MsgPack) Name() string { return MsgPackName }

// IsBinary tells connect to base64 a GET request's message in the URL.
func (MsgPack) IsBinary() bool { return true }

// Marshal implements connect.Codec.
func (MsgPack) Marshal(msg any) ([]byte, error) {
	m, ok := msg.(proto.Message)
	if !ok {
		return nil, fmt.Errorf("%T is not a protobuf message", msg)
	}
	var buf bytes.Buffer
	enc := msgpack.GetEncoder()
	defer msgpack.PutEncoder(enc)
	enc.Reset(&buf)
	if err := encodeMessage(enc, m.ProtoReflect()); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// MarshalStable implements connect's stable codec: Marshal is deterministic already (fields in
// declaration order, map keys sorted).
func (c MsgPack) MarshalStable(msg any) ([]byte, error) { return c.Marshal(msg) }

// Unmarshal implements connect.Codec. The input must be exactly one MessagePack map (or nil).
func (MsgPack) Unmarshal(data []byte, msg any) error {
	m, ok := msg.(proto.Message)
	if !ok {
		return fmt.Errorf("%T is not a protobuf message", msg)
	}
	proto.Reset(m)
	if len(data) == 0 {
		return errors.New("malformed MessagePack request: empty body (want a map)")
	}
	r := bytes.NewReader(data)
	d := &mpDecoder{dec: msgpack.NewDecoder(r), r: r, data: data}
	if err := d.message(m.ProtoReflect(), ""); err != nil {
		return fmt.Errorf("malformed MessagePack request: %w", err)
	}
	if r.Len() != 0 {
		return errors.New("malformed MessagePack request: trailing bytes after the message")
	}
	return nil
}

// encodeMessage writes m as a map of its populated fields, in declaration order.
func encodeMessage(enc *msgpack.Encoder, m protoreflect.Message) error {
	if isWellKnown(m.Descriptor()) {
		return encodeWellKnown(enc, m)
	}
	fields := m.Descriptor().Fields()
	n := 0
	for i := range fields.Len() {
		if m.Has(fields.Get(i)) {
			n++
		}
	}
	if err := enc.EncodeMapLen(n); err != nil {
		return err
	}
	for i := range fields.Len() {
		fd := fields.Get(i)
		if !m.Has(fd) {
			continue
		}
		if err := enc.EncodeString(fd.JSONName()); err != nil {
			return err
		}
		if err := encodeField(enc, fd, m.Get(fd)); err != nil {
			return err
		}
	}
	return nil
}

func encodeField(enc *msgpack.Encoder, fd protoreflect.FieldDescriptor, v protoreflect.Value) error {
	switch {
	case fd.IsList():
		list := v.List()
		if err := enc.EncodeArrayLen(list.Len()); err != nil {
			return err
		}
		for i := range list.Len() {
			if err := encodeSingular(enc, fd, list.Get(i)); err != nil {
				return err
			}
		}
		return nil
	case fd.IsMap():
		mv := v.Map()
		keys := make([]protoreflect.MapKey, 0, mv.Len())
		mv.Range(func(k protoreflect.MapKey, _ protoreflect.Value) bool {
			keys = append(keys, k)
			return true
		})
		slices.SortFunc(keys, compareKeys)
		if err := enc.EncodeMapLen(len(keys)); err != nil {
			return err
		}
		for _, k := range keys {
			if err := enc.EncodeString(k.String()); err != nil {
				return err
			}
			if err := encodeSingular(enc, fd.MapValue(), mv.Get(k)); err != nil {
				return err
			}
		}
		return nil
	default:
		return encodeSingular(enc, fd, v)
	}
}

// compareKeys orders map keys as protojson does: numbers numerically, others as strings.
func compareKeys(a, b protoreflect.MapKey) int {
	switch a.Interface().(type) {
	case int32, int64:
		return cmpOrdered(a.Int(), b.Int())
	case uint32, uint64:
		return cmpOrdered(a.Uint(), b.Uint())
	default:
		return cmpOrdered(a.String(), b.String())
	}
}

func cmpOrdered[T int64 | uint64 | string](a, b T) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func encodeSingular(enc *msgpack.Encoder, fd protoreflect.FieldDescriptor, v protoreflect.Value) error {
	switch fd.Kind() {
	case protoreflect.BoolKind:
		return enc.EncodeBool(v.Bool())
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind,
		protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		return enc.EncodeInt(v.Int())
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind, protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		return enc.EncodeUint(v.Uint())
	case protoreflect.FloatKind:
		return enc.EncodeFloat32(float32(v.Float()))
	case protoreflect.DoubleKind:
		return enc.EncodeFloat64(v.Float())
	case protoreflect.StringKind:
		return enc.EncodeString(v.String())
	case protoreflect.BytesKind:
		return enc.EncodeBytes(v.Bytes())
	case protoreflect.EnumKind:
		if ev := fd.Enum().Values().ByNumber(v.Enum()); ev != nil {
			return enc.EncodeString(string(ev.Name()))
		}
		return enc.EncodeInt(int64(v.Enum())) // a number this schema does not know, as protojson does
	case protoreflect.MessageKind, protoreflect.GroupKind:
		return encodeMessage(enc, v.Message())
	}
	return fmt.Errorf("%s: unsupported kind %s", fd.FullName(), fd.Kind())
}

// encodeWellKnown writes a google.protobuf message as its protojson form converted to
// MessagePack: Timestamp and Duration become strings.
func encodeWellKnown(enc *msgpack.Encoder, m protoreflect.Message) error {
	b, err := protojson.Marshal(m.Interface())
	if err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return err
	}
	return encodeJSONValue(enc, v)
}

func encodeJSONValue(enc *msgpack.Encoder, v any) error {
	switch v := v.(type) {
	case nil:
		return enc.EncodeNil()
	case bool:
		return enc.EncodeBool(v)
	case string:
		return enc.EncodeString(v)
	case json.Number:
		if i, err := v.Int64(); err == nil {
			return enc.EncodeInt(i)
		}
		f, err := v.Float64()
		if err != nil {
			return err
		}
		return enc.EncodeFloat64(f)
	case []any:
		if err := enc.EncodeArrayLen(len(v)); err != nil {
			return err
		}
		for _, e := range v {
			if err := encodeJSONValue(enc, e); err != nil {
				return err
			}
		}
		return nil
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		if err := enc.EncodeMapLen(len(keys)); err != nil {
			return err
		}
		for _, k := range keys {
			if err := enc.EncodeString(k); err != nil {
				return err
			}
			if err := encodeJSONValue(enc, v[k]); err != nil {
				return err
			}
		}
		return nil
	}
	return fmt.Errorf("unexpected JSON value %T", v)
}

// intBits is the bit size of an integer kind, for range checks.
func intBits(k protoreflect.Kind) int {
	switch k {
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind,
		protoreflect.Uint32Kind, protoreflect.Fixed32Kind, protoreflect.EnumKind:
		return 32
	}
	return 64
}

// parseKey parses a map key given as a string.
func parseKey(fd protoreflect.FieldDescriptor, s string) (protoreflect.MapKey, error) {
	switch fd.Kind() {
	case protoreflect.StringKind:
		return protoreflect.ValueOfString(s).MapKey(), nil
	case protoreflect.BoolKind:
		b, err := strconv.ParseBool(s)
		if err != nil || (s != "true" && s != "false") {
			return protoreflect.MapKey{}, fmt.Errorf("map key %q is not a bool", s)
		}
		return protoreflect.ValueOfBool(b).MapKey(), nil
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind,
		protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		n, err := strconv.ParseInt(s, 10, intBits(fd.Kind()))
		if err != nil {
			return protoreflect.MapKey{}, fmt.Errorf("map key %q is not an int%d", s, intBits(fd.Kind()))
		}
		if intBits(fd.Kind()) == 32 {
			return protoreflect.ValueOfInt32(int32(n)).MapKey(), nil //nolint:gosec // parsed with bitSize 32
		}
		return protoreflect.ValueOfInt64(n).MapKey(), nil
	default:
		n, err := strconv.ParseUint(s, 10, intBits(fd.Kind()))
		if err != nil {
			return protoreflect.MapKey{}, fmt.Errorf("map key %q is not a uint%d", s, intBits(fd.Kind()))
		}
		if intBits(fd.Kind()) == 32 {
			return protoreflect.ValueOfUint32(uint32(n)).MapKey(), nil //nolint:gosec // parsed with bitSize 32
		}
		return protoreflect.ValueOfUint64(n).MapKey(), nil
	}
}
