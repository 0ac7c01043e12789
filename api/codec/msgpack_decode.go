package codec

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"unicode/utf8"

	"github.com/vmihailenco/msgpack/v5"
	"github.com/vmihailenco/msgpack/v5/msgpcode"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/jq-dev/jq/queue"
)

// MaxDepth is how deeply a MessagePack request may nest maps and arrays, counted over the whole
// document: the request's own messages, lists and maps, and every value inside a field
// (payloads, well-known types, unknown keys). It is the limit of encoding/json and protojson,
// so the JSON and MessagePack forms of a request nest alike. The bound holds wherever the
// value goes afterwards: the library's decoder and every handler that decodes a payload
// recurse once per level.
const MaxDepth = 10000

// mpDecoder decodes MessagePack along a message descriptor. It peeks at every type code itself:
// the library's typed decoders are lenient (nil decodes as 0, a str as bytes), and its Skip
// recurses once per nesting level, which a hostile body could abuse.
type mpDecoder struct {
	dec   *msgpack.Decoder
	r     *bytes.Reader // the decoder's input, read without buffering: it gives the offset
	data  []byte
	depth int // maps and arrays open around the next value
}

// enter opens one map or array level; leave closes it.
func (d *mpDecoder) enter(path string) error {
	if d.depth >= MaxDepth {
		return errDepth(path)
	}
	d.depth++
	return nil
}

func (d *mpDecoder) leave() { d.depth-- }

func errDepth(path string) error {
	return fmt.Errorf("%s: nested deeper than %d levels", at(path), MaxDepth)
}

func (d *mpDecoder) offset() int { return len(d.data) - d.r.Len() }

// peek returns the type code of the next value after checking that the length its header
// declares fits in what is left of the input. Every read goes through peek first, so the
// library never allocates for a length it was only told: a 45-byte body claiming a 4 GiB bin
// is refused here, and an array or map cannot claim more elements than bytes remain.
func (d *mpDecoder) peek() (byte, error) {
	c, err := d.dec.PeekCode()
	if err != nil {
		return 0, errTruncated(err)
	}
	if err := checkDeclared(d.data[d.offset():]); err != nil {
		return 0, err
	}
	return c, nil
}

// checkDeclared reads the header at the start of b and refuses a declared length (bytes of a
// str, bin or ext; elements of an array; entries of a map, each at least two bytes) that
// exceeds the bytes after the header.
func checkDeclared(b []byte) error {
	c := b[0]
	var size, count int // header bytes after the code; bytes per declared element
	switch {
	case msgpcode.IsFixedString(c):
		return fits(b, 1, int(c&0x1f), 1)
	case msgpcode.IsFixedArray(c):
		return fits(b, 1, int(c&0x0f), 1)
	case msgpcode.IsFixedMap(c):
		return fits(b, 1, int(c&0x0f), 2)
	}
	switch c {
	case msgpcode.Str8, msgpcode.Bin8:
		size, count = 1, 1
	case msgpcode.Str16, msgpcode.Bin16, msgpcode.Array16:
		size, count = 2, 1
	case msgpcode.Str32, msgpcode.Bin32, msgpcode.Array32:
		size, count = 4, 1
	case msgpcode.Map16:
		size, count = 2, 2
	case msgpcode.Map32:
		size, count = 4, 2
	case msgpcode.Ext8:
		size, count = 1, 1
	case msgpcode.Ext16:
		size, count = 2, 1
	case msgpcode.Ext32:
		size, count = 4, 1
	default: // fixed-size values: the library reads them into a small buffer
		return nil
	}
	if len(b) < 1+size {
		return errors.New("unexpected end of input")
	}
	var n uint64
	for _, x := range b[1 : 1+size] {
		n = n<<8 | uint64(x)
	}
	hdr := 1 + size
	if c == msgpcode.Ext8 || c == msgpcode.Ext16 || c == msgpcode.Ext32 {
		hdr++ // the ext type byte
	}
	if n > uint64(len(b)) {
		return fmt.Errorf("a length of %d exceeds the %d bytes left", n, max(len(b)-hdr, 0))
	}
	return fits(b, hdr, int(n), count)
}

func fits(b []byte, hdr, n, per int) error {
	left := len(b) - hdr
	if left < 0 || n > left/per {
		return fmt.Errorf("a length of %d exceeds the %d bytes left", n, max(left, 0))
	}
	return nil
}

func errTruncated(err error) error {
	if errors.Is(err, io.EOF) {
		return errors.New("unexpected end of input")
	}
	return err
}

func (d *mpDecoder) message(m protoreflect.Message, path string) error {
	md := m.Descriptor()
	if isWellKnown(md) {
		return d.wellKnown(m, path)
	}
	c, err := d.peek()
	if err != nil {
		return err
	}
	if !isMap(c) {
		return fmt.Errorf("%s: want a map for %s, got %s", at(path), md.Name(), typeName(c))
	}
	n, err := d.dec.DecodeMapLen()
	if err != nil {
		return errTruncated(err)
	}
	if err := d.enter(path); err != nil {
		return err
	}
	defer d.leave()
	fields := md.Fields()
	seen := map[protoreflect.FieldNumber]bool{}
	for range n {
		c, err := d.peek()
		if err != nil {
			return err
		}
		if !msgpcode.IsString(c) {
			return fmt.Errorf("%s: want str keys in %s, got %s", at(path), md.Name(), typeName(c))
		}
		name, err := d.dec.DecodeString()
		if err != nil {
			return errTruncated(err)
		}
		fd := fields.ByJSONName(name)
		if fd == nil {
			fd = fields.ByTextName(name)
		}
		if fd == nil { // unknown fields are ignored, as the JSON codec does
			if err := d.skip(path + queue.Excerpt(name)); err != nil {
				return err
			}
			continue
		}
		fpath := path + string(fd.Name())
		if seen[fd.Number()] {
			return fmt.Errorf("%s: given twice", fpath)
		}
		seen[fd.Number()] = true
		if c, err = d.peek(); err != nil {
			return err
		}
		if c == msgpcode.Nil && !(fd.Kind() == protoreflect.MessageKind && fd.Message().FullName() == "google.protobuf.Value") {
			_ = d.dec.Skip() // nil: the field is unset
			continue
		}
		if od := fd.ContainingOneof(); od != nil && !od.IsSynthetic() && m.WhichOneof(od) != nil {
			return fmt.Errorf("%s: another field of oneof %s is set already", fpath, od.Name())
		}
		if err := d.field(m, fd, fpath); err != nil {
			return err
		}
	}
	return nil
}

func (d *mpDecoder) field(m protoreflect.Message, fd protoreflect.FieldDescriptor, path string) error {
	switch {
	case fd.IsList():
		c, _ := d.peek()
		if !isArray(c) {
			return fmt.Errorf("%s: want an array, got %s", path, typeName(c))
		}
		n, err := d.dec.DecodeArrayLen()
		if err != nil {
			return errTruncated(err)
		}
		if err := d.enter(path + "."); err != nil {
			return err
		}
		defer d.leave()
		list := m.Mutable(fd).List()
		for i := range n {
			epath := fmt.Sprintf("%s[%d]", path, i)
			if fd.Message() != nil {
				e := list.NewElement()
				if err := d.message(e.Message(), epath+"."); err != nil {
					return err
				}
				list.Append(e)
				continue
			}
			v, err := d.scalar(fd, epath)
			if err != nil {
				return err
			}
			list.Append(v)
		}
		return nil
	case fd.IsMap():
		c, _ := d.peek()
		if !isMap(c) {
			return fmt.Errorf("%s: want a map, got %s", path, typeName(c))
		}
		n, err := d.dec.DecodeMapLen()
		if err != nil {
			return errTruncated(err)
		}
		if err := d.enter(path + "."); err != nil {
			return err
		}
		defer d.leave()
		mv := m.Mutable(fd).Map()
		for range n {
			k, err := d.mapKey(fd.MapKey(), path)
			if err != nil {
				return err
			}
			epath := path + "[" + queue.Excerpt(k.String()) + "]"
			if fd.MapValue().Message() != nil {
				v := mv.NewValue()
				if err := d.message(v.Message(), epath+"."); err != nil {
					return err
				}
				mv.Set(k, v)
				continue
			}
			v, err := d.scalar(fd.MapValue(), epath)
			if err != nil {
				return err
			}
			mv.Set(k, v)
		}
		return nil
	case fd.Message() != nil:
		return d.message(m.Mutable(fd).Message(), path+".")
	default:
		v, err := d.scalar(fd, path)
		if err != nil {
			return err
		}
		m.Set(fd, v)
		return nil
	}
}

// mapKey reads a map key: a str in protojson's form, or for integer and bool keys the native
// value.
func (d *mpDecoder) mapKey(fd protoreflect.FieldDescriptor, path string) (protoreflect.MapKey, error) {
	c, err := d.peek()
	if err != nil {
		return protoreflect.MapKey{}, err
	}
	switch {
	case msgpcode.IsString(c):
		s, err := d.dec.DecodeString()
		if err != nil {
			return protoreflect.MapKey{}, errTruncated(err)
		}
		k, err := parseKey(fd, s)
		if err != nil {
			return protoreflect.MapKey{}, fmt.Errorf("%s: %w", path, err)
		}
		return k, nil
	case fd.Kind() != protoreflect.StringKind:
		v, err := d.scalar(fd, path+" key")
		if err != nil {
			return protoreflect.MapKey{}, err
		}
		return v.MapKey(), nil
	}
	return protoreflect.MapKey{}, fmt.Errorf("%s: want str keys, got %s", path, typeName(c))
}

// scalar reads a value of a non-message field.
func (d *mpDecoder) scalar(fd protoreflect.FieldDescriptor, path string) (protoreflect.Value, error) {
	c, err := d.peek()
	if err != nil {
		return protoreflect.Value{}, err
	}
	wrong := func() (protoreflect.Value, error) {
		return protoreflect.Value{}, fmt.Errorf("%s: want %s, got %s", path, kindName(fd), typeName(c))
	}
	switch fd.Kind() {
	case protoreflect.BoolKind:
		if c != msgpcode.True && c != msgpcode.False {
			return wrong()
		}
		b, err := d.dec.DecodeBool()
		return protoreflect.ValueOfBool(b), errTruncated(err)
	case protoreflect.StringKind:
		if !msgpcode.IsString(c) {
			return wrong()
		}
		s, err := d.dec.DecodeString()
		if err != nil {
			return protoreflect.Value{}, errTruncated(err)
		}
		if !utf8.ValidString(s) {
			return protoreflect.Value{}, fmt.Errorf("%s: invalid UTF-8", path)
		}
		return protoreflect.ValueOfString(s), nil
	case protoreflect.BytesKind:
		if msgpcode.IsBin(c) {
			b, err := d.dec.DecodeBytes()
			return protoreflect.ValueOfBytes(b), errTruncated(err)
		}
		// Any other value is kept as its own MessagePack encoding.
		start := d.offset()
		if err := d.skip(path); err != nil {
			return protoreflect.Value{}, err
		}
		return protoreflect.ValueOfBytes(bytes.Clone(d.data[start:d.offset()])), nil
	case protoreflect.FloatKind, protoreflect.DoubleKind:
		if c != msgpcode.Float && c != msgpcode.Double && !isInt(c) {
			return wrong()
		}
		f, err := d.dec.DecodeFloat64()
		if err != nil {
			return protoreflect.Value{}, errTruncated(err)
		}
		if fd.Kind() == protoreflect.FloatKind {
			if math.Abs(f) > math.MaxFloat32 && !math.IsInf(f, 0) {
				return protoreflect.Value{}, fmt.Errorf("%s: %g is out of range for float", path, f)
			}
			return protoreflect.ValueOfFloat32(float32(f)), nil
		}
		return protoreflect.ValueOfFloat64(f), nil
	case protoreflect.EnumKind:
		if msgpcode.IsString(c) {
			s, err := d.dec.DecodeString()
			if err != nil {
				return protoreflect.Value{}, errTruncated(err)
			}
			ev := fd.Enum().Values().ByName(protoreflect.Name(s))
			if ev == nil {
				return protoreflect.Value{}, fmt.Errorf("%s: %s is not a value of %s", path, queue.Excerpt(s), fd.Enum().Name())
			}
			return protoreflect.ValueOfEnum(ev.Number()), nil
		}
		if !isInt(c) {
			return wrong()
		}
		n, err := d.signed(32, path)
		return protoreflect.ValueOfEnum(protoreflect.EnumNumber(n)), err //nolint:gosec // read as 32 bits
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind,
		protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		var n int64
		switch {
		case isInt(c):
			n, err = d.signed(intBits(fd.Kind()), path)
		case msgpcode.IsString(c):
			n, err = d.decimal(func(s string) (int64, error) { return strconv.ParseInt(s, 10, intBits(fd.Kind())) }, path)
		default:
			return wrong()
		}
		if intBits(fd.Kind()) == 32 {
			return protoreflect.ValueOfInt32(int32(n)), err //nolint:gosec // read as 32 bits
		}
		return protoreflect.ValueOfInt64(n), err
	default: // the unsigned kinds
		var n uint64
		switch {
		case isInt(c):
			n, err = d.unsigned(intBits(fd.Kind()), path)
		case msgpcode.IsString(c):
			n, err = d.decimal64u(intBits(fd.Kind()), path)
		default:
			return wrong()
		}
		if intBits(fd.Kind()) == 32 {
			return protoreflect.ValueOfUint32(uint32(n)), err //nolint:gosec // read as 32 bits
		}
		return protoreflect.ValueOfUint64(n), err
	}
}

// signed reads an integer code that must fit bits signed bits.
func (d *mpDecoder) signed(bits int, path string) (int64, error) {
	c, _ := d.peek()
	if c == msgpcode.Uint64 {
		u, err := d.dec.DecodeUint64()
		if err != nil {
			return 0, errTruncated(err)
		}
		if u > math.MaxInt64 {
			return 0, fmt.Errorf("%s: %d is out of range", path, u)
		}
		return d.fits(int64(u), bits, path)
	}
	n, err := d.dec.DecodeInt64()
	if err != nil {
		return 0, errTruncated(err)
	}
	return d.fits(n, bits, path)
}

func (d *mpDecoder) fits(n int64, bits int, path string) (int64, error) {
	if bits == 32 && (n < math.MinInt32 || n > math.MaxInt32) {
		return 0, fmt.Errorf("%s: %d is out of range for int32", path, n)
	}
	return n, nil
}

// unsigned reads an integer code that must be non-negative and fit bits bits.
func (d *mpDecoder) unsigned(bits int, path string) (uint64, error) {
	c, _ := d.peek()
	var u uint64
	if c == msgpcode.Uint64 {
		var err error
		if u, err = d.dec.DecodeUint64(); err != nil {
			return 0, errTruncated(err)
		}
	} else {
		n, err := d.dec.DecodeInt64()
		if err != nil {
			return 0, errTruncated(err)
		}
		if n < 0 {
			return 0, fmt.Errorf("%s: %d is negative", path, n)
		}
		u = uint64(n)
	}
	if bits == 32 && u > math.MaxUint32 {
		return 0, fmt.Errorf("%s: %d is out of range for uint32", path, u)
	}
	return u, nil
}

// decimal reads an integer given as a decimal string, as protojson accepts.
func (d *mpDecoder) decimal(parse func(string) (int64, error), path string) (int64, error) {
	s, err := d.dec.DecodeString()
	if err != nil {
		return 0, errTruncated(err)
	}
	n, err := parse(s)
	if err != nil {
		return 0, fmt.Errorf("%s: %s is not an integer in range", path, queue.Excerpt(s))
	}
	return n, nil
}

func (d *mpDecoder) decimal64u(bits int, path string) (uint64, error) {
	s, err := d.dec.DecodeString()
	if err != nil {
		return 0, errTruncated(err)
	}
	n, err := strconv.ParseUint(s, 10, bits)
	if err != nil {
		return 0, fmt.Errorf("%s: %s is not an unsigned integer in range", path, queue.Excerpt(s))
	}
	return n, nil
}

// wellKnown reads a google.protobuf message: a Timestamp from the MessagePack timestamp
// extension, anything else from its protojson form.
func (d *mpDecoder) wellKnown(m protoreflect.Message, path string) error {
	c, err := d.peek()
	if err != nil {
		return err
	}
	if m.Descriptor().FullName() == "google.protobuf.Timestamp" && msgpcode.IsExt(c) {
		ts, err := d.timestamp()
		if err != nil {
			return fmt.Errorf("%s: %w", at(path), err)
		}
		if err := ts.CheckValid(); err != nil {
			return fmt.Errorf("%s: %w", at(path), err)
		}
		proto.Merge(m.Interface(), ts)
		return nil
	}
	if want, ok := scalarForm[m.Descriptor().FullName()]; ok && (isMap(c) || isArray(c)) {
		return fmt.Errorf("%s: want %s for %s, got %s", at(path), want, m.Descriptor().Name(), typeName(c))
	}
	// Struct, ListValue, wrappers and the like go through protojson. skip checks every nested
	// header against the input and the nesting against MaxDepth first, so the library's
	// recursive decode of that span is bounded by both.
	start := d.offset()
	if err := d.skip(at(path)); err != nil {
		return err
	}
	var v any
	if err := msgpack.Unmarshal(d.data[start:d.offset()], &v); err != nil {
		return fmt.Errorf("%s: %w", at(path), err)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("%s: %w", at(path), err)
	}
	return protojsonInto(b, m, path)
}

// scalarForm names the form of the well-known types whose protojson form is a single scalar: a
// map or array there is refused before any of it is read.
var scalarForm = map[protoreflect.FullName]string{
	"google.protobuf.Timestamp": "a str or timestamp ext", "google.protobuf.Duration": "a str",
	"google.protobuf.FieldMask": "a str", "google.protobuf.BoolValue": "a bool",
	"google.protobuf.StringValue": "a str", "google.protobuf.BytesValue": "a str",
	"google.protobuf.DoubleValue": "a number", "google.protobuf.FloatValue": "a number",
	"google.protobuf.Int32Value": "a number", "google.protobuf.Int64Value": "a number",
	"google.protobuf.UInt32Value": "a number", "google.protobuf.UInt64Value": "a number",
}

// timestamp reads the MessagePack timestamp extension (type -1) in its three sizes. It reads
// the nanoseconds as given: the library would normalise 1.5e9 ns into the seconds, which the
// protobuf and JSON paths refuse.
func (d *mpDecoder) timestamp() (*timestamppb.Timestamp, error) {
	typ, n, err := d.dec.DecodeExtHeader()
	if err != nil {
		return nil, errTruncated(err)
	}
	if typ != -1 {
		return nil, fmt.Errorf("ext type %d is not a timestamp", typ)
	}
	b := make([]byte, n) // n was checked against the input by peek
	if _, err := io.ReadFull(d.r, b); err != nil {
		return nil, errTruncated(err)
	}
	var sec int64
	var nsec uint32
	switch n {
	case 4:
		sec = int64(binary.BigEndian.Uint32(b))
	case 8:
		v := binary.BigEndian.Uint64(b)
		nsec, sec = uint32(v>>34), int64(v&(1<<34-1))
	case 12:
		nsec, sec = binary.BigEndian.Uint32(b), int64(binary.BigEndian.Uint64(b[4:])) //nolint:gosec // the spec's seconds are a signed 64-bit value: the bits are reinterpreted
	default:
		return nil, fmt.Errorf("a timestamp of %d bytes (want 4, 8 or 12)", n)
	}
	if nsec > 999_999_999 {
		return nil, fmt.Errorf("timestamp nanoseconds %d out of range", nsec)
	}
	return &timestamppb.Timestamp{Seconds: sec, Nanos: int32(nsec)}, nil
}

func protojsonInto(b []byte, m protoreflect.Message, path string) error {
	if err := protojson.Unmarshal(b, m.Interface()); err != nil {
		return fmt.Errorf("%s: not a valid %s", at(path), m.Descriptor().Name())
	}
	return nil
}

// skip passes over one value of any type without recursion: a hostile body of nested arrays
// must not cost a stack frame per level. It refuses a value nested deeper than MaxDepth in the
// document, so what it passed over is safe for a recursive decoder. name is the value's place
// in the request, for the error.
func (d *mpDecoder) skip(name string) error {
	// left[i] is how many values remain to be read in the container open at level i.
	left := []int{1}
	for len(left) > 0 {
		top := len(left) - 1
		if left[top] == 0 {
			left = left[:top]
			continue
		}
		left[top]--
		c, err := d.peek()
		if err != nil {
			return err
		}
		var l int
		switch {
		case isArray(c):
			l, err = d.dec.DecodeArrayLen()
		case isMap(c):
			l, err = d.dec.DecodeMapLen()
			l *= 2
		default:
			if err := d.dec.Skip(); err != nil {
				return errTruncated(err)
			}
			continue
		}
		if err != nil {
			return errTruncated(err)
		}
		if d.depth+len(left) > MaxDepth {
			return fmt.Errorf("%s: nested deeper than %d levels", name, MaxDepth)
		}
		left = append(left, l)
	}
	return nil
}

func isMap(c byte) bool { return msgpcode.IsFixedMap(c) || c == msgpcode.Map16 || c == msgpcode.Map32 }

func isArray(c byte) bool {
	return msgpcode.IsFixedArray(c) || c == msgpcode.Array16 || c == msgpcode.Array32
}

func isInt(c byte) bool {
	if msgpcode.IsFixedNum(c) {
		return true
	}
	switch c {
	case msgpcode.Uint8, msgpcode.Uint16, msgpcode.Uint32, msgpcode.Uint64,
		msgpcode.Int8, msgpcode.Int16, msgpcode.Int32, msgpcode.Int64:
		return true
	}
	return false
}

// typeName names a MessagePack type code for error messages.
func typeName(c byte) string {
	switch {
	case isMap(c):
		return "map"
	case isArray(c):
		return "array"
	case isInt(c):
		return "int"
	case msgpcode.IsString(c):
		return "str"
	case msgpcode.IsBin(c):
		return "bin"
	case msgpcode.IsExt(c):
		return "ext"
	case c == msgpcode.Nil:
		return "nil"
	case c == msgpcode.True || c == msgpcode.False:
		return "bool"
	case c == msgpcode.Float || c == msgpcode.Double:
		return "float"
	}
	return fmt.Sprintf("code 0x%02x", c)
}

func kindName(fd protoreflect.FieldDescriptor) string {
	if fd.Kind() == protoreflect.EnumKind {
		return "an enum name or number"
	}
	return fd.Kind().String()
}

// at names a position in a request for error messages; the top level is "request".
func at(path string) string {
	if path == "" {
		return "request"
	}
	return path[:len(path)-1] // drop the trailing "."
}
