package sqlstore

import (
	"time"

	"github.com/jq-dev/jq/queue"
)

// BreakerRow is one element of workers.breakers (JSON in both stores): field names fixed here, not
// by the domain type's.
type BreakerRow struct {
	Queue       string    `json:"queue"`
	State       string    `json:"state"`
	FailureRate float64   `json:"failure_rate"`
	Samples     int       `json:"samples"`
	Since       time.Time `json:"since"`
}

// BreakerRows are the stored form of a worker's breakers.
func BreakerRows(bs []queue.QueueBreaker) []BreakerRow {
	rows := make([]BreakerRow, len(bs))
	for i, b := range bs {
		rows[i] = BreakerRow{Queue: b.Queue, State: string(b.State), FailureRate: b.FailureRate, Samples: b.Samples, Since: b.Since.UTC()}
	}
	return rows
}

// WorkerRow holds the columns of a workers row that both stores scan into plain values and convert
// the same way; the others scan straight into the queue.Worker.
type WorkerRow struct {
	Status   string
	Breakers []BreakerRow
}

// Into sets w's status and breakers from r, and its queues to an empty list when it has none.
func (r WorkerRow) Into(w *queue.Worker) {
	w.Status = queue.WorkerStatus(r.Status)
	for _, b := range r.Breakers {
		w.Breakers = append(w.Breakers, queue.QueueBreaker{Queue: b.Queue, State: queue.BreakerState(b.State),
			FailureRate: b.FailureRate, Samples: b.Samples, Since: b.Since.UTC()})
	}
	if w.Queues == nil {
		w.Queues = []string{}
	}
}
