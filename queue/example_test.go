package queue_test

import (
	"errors"
	"fmt"
	"time"

	"github.com/jq-dev/jq/queue"
)

func ExampleCheckTransition() {
	fmt.Println(queue.CheckTransition(queue.StatePending, queue.StateAssigned))
	err := queue.CheckTransition(queue.StateDone, queue.StatePending)
	fmt.Println(err)
	fmt.Println(errors.Is(err, queue.ErrIllegalTransition))
	// Output:
	// <nil>
	// illegal job state transition DONE -> PENDING
	// true
}

func ExampleRetryPolicy_Backoff() {
	p := queue.RetryPolicy{Base: 5 * time.Second, Max: 300 * time.Second}
	var delays []time.Duration
	for attempt := range 8 {
		delays = append(delays, p.Backoff(attempt, nil))
	}
	fmt.Println(delays)
	// With jitter: up to 10 % of the capped delay on top.
	fmt.Println(p.Backoff(10, func() float64 { return 0.5 }))
	// Output:
	// [5s 10s 20s 40s 1m20s 2m40s 5m0s 5m0s]
	// 5m15s
}
