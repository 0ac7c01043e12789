// Package codec holds jq's wire encodings beyond protobuf binary: the rule that lets JSON carry
// payloads and results as JSON values, and a protobuf-aware MessagePack codec for connect. Both
// are defined by the message descriptors alone, so every message with a bytes field follows the
// same rule; the protobuf and gRPC wires are untouched.
//
// # JSON: bytes fields as JSON values
//
// protojson writes a bytes field as a base64 string. jq keeps that (it is the proto3 JSON mapping,
// so older clients keep working) and adds one form for humans:
//
//   - Input: a JSON string is base64, as in proto3. null means empty, as in proto3. Any other JSON
//     value (object, array, number, true, false) is taken as the field's bytes: its JSON text
//     exactly as written in the request, from its first to its last character.
//   - Output: bytes that are a valid UTF-8 JSON text whose value is an object, array, number, true
//     or false, with no whitespace before or after it, are written as that JSON value, byte for
//     byte. Everything else (binary data, empty bytes, a JSON string or null, text with
//     surrounding whitespace) is written as base64, as in proto3.
//
// The two halves round-trip: what the server writes, a client may send back unchanged and get
// the same bytes. A payload that is itself a JSON string, or null, can only be sent and is only
// returned as base64. The rule applies to every bytes field of jq.v1 messages (JobSpec.payload,
// Job.payload, JobResult.data, JobSuccess.result), in lists and maps too; the well-known types
// keep their protojson forms.
//
// # MessagePack
//
// MsgPack (connect codec name "msgpack": Content-Type application/msgpack for unary Connect,
// application/connect+msgpack for streams) maps a message as protojson maps it to JSON, with
// MessagePack's own types where it has them:
//
//   - a message is a map keyed by the fields' JSON names (lowerCamelCase; the proto names are
//     accepted on input); unpopulated fields are left out, nil on input means unset, unknown
//     keys are ignored;
//   - bytes fields are bin. On input any other value (map, array, str, number, bool, ext) is
//     taken as the field's bytes: its own MessagePack encoding, byte for byte, so a payload sent
//     as a map reaches the handler as that map's MessagePack. Output is always bin;
//   - integers (64-bit included) are MessagePack integers, floats are float32/float64, strings
//     are str; integers may also be given as decimal strings;
//   - enums are their value names as str (numbers are accepted on input; an unknown name is
//     refused);
//   - maps are maps with string keys (an integer or bool key in its decimal or true/false form);
//   - Timestamp and Duration are strings in their protojson forms ("2026-11-23T10:00:00Z",
//     "1.500s"); a Timestamp may also be given as the MessagePack timestamp extension (-1). Other
//     well-known types take their protojson JSON form, converted to MessagePack;
//   - maps and arrays nest at most MaxDepth (10,000) levels in the whole request, counted through
//     its messages, lists, maps and every value inside a field (payloads and unknown keys
//     included), as encoding/json and protojson count for the JSON form. A deeper request is
//     refused before any of its excess is read; a map or array where a Timestamp, Duration,
//     FieldMask or wrapper belongs is refused before any of it is read.
package codec
