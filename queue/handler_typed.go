package queue

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// HandlerOf adapts a function taking typed arguments to a [Handler]: the job's payload is decoded
// from JSON into a T, strictly, and the function's result is encoded as the job's result.
//
// Decoding refuses unknown fields and trailing data; a payload that does not decode is a
// [Permanent] failure (another attempt would read the same bytes), so the job is dead-lettered
// with the decode error instead of burning its retries. An empty payload decodes as T's zero value.
//
// The result R is returned as it is when it is []byte or json.RawMessage, as an empty result when
// it is nil, and JSON-encoded otherwise. Submit the arguments with client.SubmitArgs.
//
// It is a function named HandlerOf rather than a generic HandlerFunc because [HandlerFunc] is
// already the non-generic adapter type, and Go has no overloading; "handler of T" also reads like
// the standard library's atomic.Pointer[T].
func HandlerOf[T, R any](f func(ctx context.Context, job *Job, args T) (R, error)) Handler {
	if f == nil {
		panic("queue: HandlerOf with a nil function")
	}
	return HandlerFunc(func(ctx context.Context, job *Job) ([]byte, error) {
		var args T
		if err := DecodeArgs(job.Payload, &args); err != nil {
			return nil, Permanent(fmt.Errorf("job %s of type %q: %w", job.ID, job.Type, err))
		}
		res, err := f(ctx, job, args)
		if err != nil {
			return nil, err
		}
		return encodeResult(res)
	})
}

// ErrBadPayload means a job's payload does not decode into the handler's argument type.
var ErrBadPayload = errors.New("payload does not decode")

// DecodeArgs decodes a JSON payload into v strictly, as [HandlerOf] does: unknown fields and data
// after the value are refused, and an empty payload leaves v as it is. Errors wrap [ErrBadPayload].
func DecodeArgs(payload []byte, v any) error {
	if len(bytes.TrimSpace(payload)) == 0 {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(payload))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("%w into %T: %w", ErrBadPayload, v, err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return fmt.Errorf("%w into %T: data after the JSON value", ErrBadPayload, v)
	}
	return nil
}

func encodeResult(res any) ([]byte, error) {
	switch r := res.(type) {
	case nil:
		return nil, nil
	case []byte:
		return r, nil
	case json.RawMessage:
		return r, nil
	}
	b, err := json.Marshal(res)
	if err != nil {
		// The handler's result type cannot be encoded: a bug no retry fixes.
		return nil, Permanent(fmt.Errorf("encode the result: %w", err))
	}
	return b, nil
}
