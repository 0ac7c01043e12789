package sqlstore

import "github.com/jq-dev/jq/queue"

// Byte budgets of job pages (JobListParams.MaxBytes, JobPeekParams.MaxBytes). A backend reads the
// jobs of a page without their payload and result, cuts the page where the budget runs out, and
// only then reads the data of the jobs it keeps: the data it holds at once is bounded by the
// budget, not by the page size times the largest payload.

// jobFixedBytes is an allowance for the fixed-size fields of an encoded job (ids, numbers,
// timestamps, durations, the checksum) and their tags, rounded up.
const jobFixedBytes = 320

// JobPageBytes estimates, from above, what j adds to an encoded page of jobs: its variable-length
// fields, dataBytes of payload and result (0 when they are left out), and the fixed allowance.
func JobPageBytes(j *queue.Job, dataBytes int64) int64 {
	n := int64(jobFixedBytes + len(j.ID) + len(j.Queue) + len(j.Type) + len(j.IdempotencyKey) +
		len(j.WorkerID) + len(j.LastError) + len(j.FailureReason) + len(j.ResultChecksum))
	for _, m := range []map[string]string{j.Labels, j.TraceContext} {
		for k, v := range m {
			n += int64(len(k)+len(v)) + 16 // entry, key and value tags and lengths
		}
	}
	if dataBytes > 0 {
		n += dataBytes + 20 // two fields' tags and lengths
	}
	return n
}

// PageCut is how many of a page's jobs fit maxBytes, given each one's JobPageBytes: at least one
// (a page always makes progress), and all of them when maxBytes is 0 or less.
func PageCut(sizes []int64, maxBytes int) int {
	if maxBytes <= 0 {
		return len(sizes)
	}
	var total int64
	for i, s := range sizes {
		total += s
		if i > 0 && total > int64(maxBytes) {
			return i
		}
	}
	return len(sizes)
}
