package store

// The page token's codec, for its tests and fuzzing: outside them a token is made by
// JobListParams.CursorAfter and read by JobListParams.Validate.
var (
	EncodeJobCursor = encodeJobCursor
	DecodeJobCursor = decodeJobCursor
)
