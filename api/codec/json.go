package codec

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// MarshalJSON is opts.Marshal(m) with the bytes fields that hold JSON values written as those
// values (see the package comment). With opts.Multiline the whole document is re-indented.
//
// It costs about the output's size once: protojson writes a copy of m whose bytes fields hold
// short placeholders, and the real values are spliced in, each written straight into the output
// (JSON text as it is, anything else as base64). Marshalling first and rewriting the base64
// afterwards cost over twenty times a page of payloads in allocations.
func MarshalJSON(opts protojson.MarshalOptions, m proto.Message) ([]byte, error) {
	if !hasBytes(m.ProtoReflect().Descriptor()) {
		return opts.Marshal(m)
	}
	var s splicer
	if _, err := rand.Read(s.tag[:]); err != nil {
		return nil, err
	}
	s.quoted = make([]byte, 0, 1+base64.StdEncoding.EncodedLen(len(s.tag)))
	s.quoted = base64.StdEncoding.AppendEncode(append(s.quoted, '"'), s.tag[:])
	b, err := opts.Marshal(s.stub(m.ProtoReflect()).Interface())
	if err != nil {
		return nil, err
	}
	out, err := s.splice(b)
	if err != nil {
		return nil, err
	}
	if opts.Multiline && len(s.values) > 0 {
		var buf bytes.Buffer
		if err := json.Indent(&buf, out, "", indentOf(opts)); err != nil {
			return nil, err
		}
		return buf.Bytes(), nil
	}
	return out, nil
}

// splicer replaces the bytes fields of a message with placeholders and puts their values back
// into protojson's output. A placeholder is 12 random bytes (the same for one call) and a 6-byte
// index, so protojson writes it as a 32-character base64 string that no other field of the
// message can be made to hold.
type splicer struct {
	tag    [12]byte
	quoted []byte // `"` and the tag's base64: how every placeholder starts in the output
	values [][]byte
}

// stub returns a copy of m that shares everything but its bytes fields, which hold placeholders
// (recursively through messages, lists and maps; the well-known types are shared as they are).
func (s *splicer) stub(m protoreflect.Message) protoreflect.Message {
	out := m.New()
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		switch {
		case fd.IsList():
			if !carriesBytes(fd) {
				out.Set(fd, v)
				break
			}
			src, dst := v.List(), out.Mutable(fd).List()
			for i := range src.Len() {
				dst.Append(s.stubValue(fd, src.Get(i)))
			}
		case fd.IsMap():
			if !carriesBytes(fd.MapValue()) {
				out.Set(fd, v)
				break
			}
			dst := out.Mutable(fd).Map()
			v.Map().Range(func(k protoreflect.MapKey, e protoreflect.Value) bool {
				dst.Set(k, s.stubValue(fd.MapValue(), e))
				return true
			})
		default:
			out.Set(fd, s.stubValue(fd, v))
		}
		return true
	})
	return out
}

// carriesBytes reports whether values of fd are, or may contain, bytes that the rule applies to.
func carriesBytes(fd protoreflect.FieldDescriptor) bool {
	switch fd.Kind() {
	case protoreflect.BytesKind:
		return true
	case protoreflect.MessageKind, protoreflect.GroupKind:
		return hasBytes(fd.Message())
	}
	return false
}

// stubValue is one value of fd (a singular field, a list element or a map value) as stub puts it.
func (s *splicer) stubValue(fd protoreflect.FieldDescriptor, v protoreflect.Value) protoreflect.Value {
	switch fd.Kind() {
	case protoreflect.BytesKind:
		var ph, n [18]byte // n: the index, big-endian in its last 8 bytes
		copy(ph[:], s.tag[:])
		binary.BigEndian.PutUint64(n[10:], uint64(len(s.values)))
		copy(ph[12:], n[12:])
		s.values = append(s.values, v.Bytes())
		return protoreflect.ValueOfBytes(ph[:])
	case protoreflect.MessageKind, protoreflect.GroupKind:
		if hasBytes(fd.Message()) {
			return protoreflect.ValueOfMessage(s.stub(v.Message()))
		}
	}
	return v
}

// splice writes b with every placeholder string replaced by its value: the JSON text itself when
// it qualifies (isJSONValue), else its base64 string as protojson writes bytes.
func (s *splicer) splice(b []byte) ([]byte, error) {
	size := len(b)
	for _, v := range s.values {
		size += base64.StdEncoding.EncodedLen(len(v)) + 2
	}
	out := make([]byte, 0, size)
	const phLen = 2 + 24 // the quotes and 18 bytes of base64
	for found := 0; ; found++ {
		i := bytes.Index(b, s.quoted)
		if i < 0 {
			if found != len(s.values) {
				return nil, fmt.Errorf("codec: %d of %d bytes fields found in the encoding", found, len(s.values))
			}
			return append(out, b...), nil
		}
		if len(b) < i+phLen || b[i+phLen-1] != '"' {
			return nil, errors.New("codec: a truncated placeholder in the encoding")
		}
		var ph [18]byte
		if _, err := base64.StdEncoding.Decode(ph[:], b[i+1:i+phLen-1]); err != nil {
			return nil, fmt.Errorf("codec: a placeholder: %w", err)
		}
		var idx [8]byte
		copy(idx[2:], ph[12:])
		n := binary.BigEndian.Uint64(idx[:])
		if n >= uint64(len(s.values)) {
			return nil, errors.New("codec: a placeholder out of range")
		}
		out = append(out, b[:i]...)
		if v := s.values[n]; isJSONValue(v) {
			out = append(out, v...)
		} else {
			out = append(out, '"')
			out = base64.StdEncoding.AppendEncode(out, v)
			out = append(out, '"')
		}
		b = b[i+phLen:]
	}
}

func indentOf(opts protojson.MarshalOptions) string {
	if opts.Indent == "" {
		return "  " // protojson's default for Multiline
	}
	return opts.Indent
}

// UnmarshalJSON is opts.Unmarshal(data, m) that also takes JSON values for bytes fields (see the
// package comment).
func UnmarshalJSON(opts protojson.UnmarshalOptions, data []byte, m proto.Message) error {
	return opts.Unmarshal(ValuesAsBytes(data, m.ProtoReflect().Descriptor()), m)
}

// ValuesAsBytes rewrites a JSON encoding of a message of type md so that every bytes field given
// as a JSON object, array, number or boolean holds that value's text as base64 instead, which
// protojson then decodes. Strings and nulls are left alone. Malformed or mistyped input is
// returned as far as it was understood, for protojson to report.
func ValuesAsBytes(data []byte, md protoreflect.MessageDescriptor) []byte {
	return rewrite(data, md, func(raw []byte) ([]byte, bool) {
		if raw[0] == '"' || string(raw) == "null" {
			return nil, false
		}
		out := make([]byte, 0, base64.StdEncoding.EncodedLen(len(raw))+2)
		out = append(out, '"')
		out = base64.StdEncoding.AppendEncode(out, raw)
		return append(out, '"'), true
	})
}

// BytesAsValues rewrites protojson's encoding of a message of type md so that every bytes field
// holding a JSON value that qualifies (isJSONValue) is written as that value instead of base64.
func BytesAsValues(data []byte, md protoreflect.MessageDescriptor) []byte {
	return rewrite(data, md, func(raw []byte) ([]byte, bool) {
		var s string
		if raw[0] != '"' || json.Unmarshal(raw, &s) != nil {
			return nil, false
		}
		b, err := base64.StdEncoding.DecodeString(s)
		if err != nil || !isJSONValue(b) {
			return nil, false
		}
		return b, true
	})
}

// isJSONValue reports whether b is written as a JSON value rather than base64: valid UTF-8 JSON
// text of an object, array, number or boolean without surrounding whitespace. Strings and null
// are excluded because they already mean base64 and "unset" on input.
func isJSONValue(b []byte) bool {
	if len(b) == 0 || !strings.ContainsRune("{[-0123456789tf", rune(b[0])) {
		return false
	}
	switch b[len(b)-1] {
	case ' ', '\t', '\n', '\r':
		return false
	}
	return utf8.Valid(b) && json.Valid(b)
}

// edit replaces data[start:end] with repl.
type edit struct {
	start, end int
	repl       []byte
}

// rewrite applies fix to the JSON value of every bytes field of md found in data (recursively
// through message fields, lists and maps) and splices in the replacements fix returns.
func rewrite(data []byte, md protoreflect.MessageDescriptor, fix func(raw []byte) ([]byte, bool)) []byte {
	if !hasBytes(md) {
		return data
	}
	w := walker{fix: fix}
	w.message(data, 0, md)
	if len(w.edits) == 0 {
		return data
	}
	out := make([]byte, 0, len(data))
	at := 0
	for _, e := range w.edits {
		out = append(out, data[at:e.start]...)
		out = append(out, e.repl...)
		at = e.end
	}
	return append(out, data[at:]...)
}

type walker struct {
	fix   func(raw []byte) ([]byte, bool)
	edits []edit // in input order, disjoint
}

// message walks the JSON object data, found at offset base of the whole document. Anything not
// shaped as md expects is skipped: protojson reports it.
func (w *walker) message(data []byte, base int, md protoreflect.MessageDescriptor) {
	if !hasBytes(md) {
		return
	}
	fields := md.Fields()
	w.members(data, base, func(name string, raw []byte, at int) {
		fd := fields.ByJSONName(name)
		if fd == nil {
			fd = fields.ByTextName(name)
		}
		switch {
		case fd == nil:
		case fd.IsList():
			w.elements(raw, at, func(e []byte, eat int) { w.value(e, eat, fd) })
		case fd.IsMap():
			w.members(raw, at, func(_ string, e []byte, eat int) { w.value(e, eat, fd.MapValue()) })
		default:
			w.value(raw, at, fd)
		}
	})
}

func (w *walker) value(raw []byte, at int, fd protoreflect.FieldDescriptor) {
	switch fd.Kind() {
	case protoreflect.BytesKind:
		if repl, ok := w.fix(raw); ok {
			w.edits = append(w.edits, edit{start: at, end: at + len(raw), repl: repl})
		}
	case protoreflect.MessageKind, protoreflect.GroupKind:
		w.message(raw, at, fd.Message())
	}
}

// members calls f for each member of the JSON object data with its value's text and offset.
func (w *walker) members(data []byte, base int, f func(name string, raw []byte, at int)) {
	dec := json.NewDecoder(bytes.NewReader(data))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return
	}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return
		}
		name, _ := t.(string)
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return
		}
		end := int(dec.InputOffset())
		f(name, raw, base+end-len(raw))
	}
}

// elements calls f for each element of the JSON array data with its text and offset.
func (w *walker) elements(data []byte, base int, f func(raw []byte, at int)) {
	dec := json.NewDecoder(bytes.NewReader(data))
	if t, err := dec.Token(); err != nil || t != json.Delim('[') {
		return
	}
	for dec.More() {
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return
		}
		end := int(dec.InputOffset())
		f(raw, base+end-len(raw))
	}
}

// hasBytesCache memoises hasBytes per message type.
var hasBytesCache sync.Map // protoreflect.FullName → bool

// hasBytes reports whether a message of type md can hold a bytes field that the JSON rule
// applies to, directly or in a nested message. The well-known types keep their own JSON forms.
func hasBytes(md protoreflect.MessageDescriptor) bool {
	if v, ok := hasBytesCache.Load(md.FullName()); ok {
		return v.(bool)
	}
	v := scanBytes(md, map[protoreflect.FullName]bool{})
	hasBytesCache.Store(md.FullName(), v)
	return v
}

func scanBytes(md protoreflect.MessageDescriptor, seen map[protoreflect.FullName]bool) bool {
	if isWellKnown(md) || seen[md.FullName()] {
		return false
	}
	seen[md.FullName()] = true
	fields := md.Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		if fd.IsMap() {
			fd = fd.MapValue()
		}
		switch fd.Kind() {
		case protoreflect.BytesKind:
			return true
		case protoreflect.MessageKind, protoreflect.GroupKind:
			if scanBytes(fd.Message(), seen) {
				return true
			}
		}
	}
	return false
}

// isWellKnown reports a google.protobuf type, whose JSON form protojson defines specially.
func isWellKnown(md protoreflect.MessageDescriptor) bool {
	return md.ParentFile().Package() == "google.protobuf"
}
