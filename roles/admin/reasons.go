package admin

// seedReasons maps jq's reason strings to the names the seeds give the same cause, for `job logs`.
// jq's reasons are lowercase snake_case throughout its API, events and Kafka messages (and clients
// compare them); the seeds spell two of them differently, so the CLI shows both rather than the
// store holding two spellings. docs/api.md#reasons lists every reason.
var seedReasons = map[string]string{
	"cancelled":        "CANCELLED",        // seed 000 FR-012
	"output_too_large": "OUTPUT_TOO_LARGE", // seed 003 MAX_OUTPUT_BYTES
}

// reasonCell is a reason as `job logs` prints it: jq's string, with the seed's name after it when
// a seed names the reason ("cancelled (CANCELLED)"); "-" for none.
func reasonCell(reason string) string {
	if seed, ok := seedReasons[reason]; ok {
		return cell(reason) + " (" + seed + ")"
	}
	return dash(reason)
}
