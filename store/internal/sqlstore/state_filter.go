package sqlstore

import (
	"strings"

	"github.com/jq-dev/jq/queue"
)

// StateFilterSQL is the WHERE clause of a job list's state filter, as both SQL stores write it:
// literals shaped like the predicates of the partial indexes (state = 'PENDING', state IN
// ('ASSIGNED', 'RUNNING'), state = 'FAILED', state = 'DEAD_LETTERED'), so a planner can use them
// (Postgres combines them with a BitmapOr) instead of scanning the table's history for the few live
// jobs; a parameter array would hide the states from it. Only the known state names are written,
// never the caller's text; with none of them the clause matches nothing.
func StateFilterSQL(states []queue.State) string {
	want := map[queue.State]bool{}
	for _, st := range states {
		want[st] = true
	}
	var arms []string
	switch {
	case want[queue.StateAssigned] && want[queue.StateRunning]:
		arms = append(arms, "state IN ('ASSIGNED', 'RUNNING')")
	case want[queue.StateAssigned]:
		arms = append(arms, "state = 'ASSIGNED'")
	case want[queue.StateRunning]:
		arms = append(arms, "state = 'RUNNING'")
	}
	for _, st := range []queue.State{queue.StatePending, queue.StateDone, queue.StateFailed, queue.StateDeadLettered} {
		if want[st] {
			arms = append(arms, "state = '"+string(st)+"'")
		}
	}
	if len(arms) == 0 {
		return "1 = 0"
	}
	return "(" + strings.Join(arms, " OR ") + ")"
}
