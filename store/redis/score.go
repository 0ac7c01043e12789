package redis

import (
	"fmt"
	"time"

	"github.com/jq-dev/jq/queue"
)

// The ready set orders jobs by one float64 score, lowest first (ZPOPMIN):
//
//	score = (9 − priority) × priorityBand + µs since scoreEpoch
//
// Every value is an integer below 10 × priorityBand = 4e15 < 2^53, so it is
// exact in a float64 and ties only between jobs created in the same
// microsecond (Redis then orders them by job id, like Postgres). A band is
// 4e14 µs ≈ 12.7 years of creation times.
const (
	priorityBand = int64(400_000_000_000_000)
	maxOffset    = priorityBand - 1
)

// scoreEpoch is the zero of the creation-time offset.
var scoreEpoch = time.Date(2024, time.January, 1, 0, 0, 0, 0, time.UTC)

// readyScore returns the ready-set score of a job. A priority outside
// queue.MinPriority..queue.MaxPriority is ErrInvalidArgument. A creation time
// before scoreEpoch counts as the epoch and one past the band (after ~2036)
// as the band's last microsecond; such jobs keep their priority order but lose
// FIFO among themselves.
func readyScore(priority int, createdAt time.Time) (int64, error) {
	if priority < queue.MinPriority || priority > queue.MaxPriority {
		return 0, fmt.Errorf("%w: priority %d is outside %d..%d", queue.ErrInvalidArgument, priority, queue.MinPriority, queue.MaxPriority)
	}
	offset := createdAt.UnixMicro() - scoreEpoch.UnixMicro()
	offset = max(0, min(offset, maxOffset))
	return int64(queue.MaxPriority-priority)*priorityBand + offset, nil
}
