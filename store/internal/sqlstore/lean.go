package sqlstore

import "github.com/jq-dev/jq/queue"

// LeanJob is the job as a LeaseOutcome carries it: a copy without payload (empty), labels, trace
// context and result.
func LeanJob(j *queue.Job) *queue.Job {
	if j == nil {
		return nil
	}
	c := *j
	c.Payload, c.Labels, c.TraceContext, c.Result = []byte{}, nil, nil, nil
	return &c
}
