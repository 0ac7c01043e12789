package sqlstore

import (
	"fmt"
	"slices"

	"github.com/jq-dev/jq/queue"
	"github.com/jq-dev/jq/store"
)

// MaxScheduleDue bounds ScheduleDue's limit.
const MaxScheduleDue = 1000

// CheckScheduleDueLimit refuses a ScheduleDue limit outside 1..MaxScheduleDue.
func CheckScheduleDueLimit(limit int) error {
	if limit < 1 || limit > MaxScheduleDue {
		return fmt.Errorf("%w: schedule due limit %d: want 1..%d", queue.ErrInvalidArgument, limit, MaxScheduleDue)
	}
	return nil
}

// ScheduleRow holds the columns of a schedules row that both stores scan into plain values and
// convert the same way; the others scan straight into the queue.Schedule.
type ScheduleRow struct {
	TimeoutMS, TTLMS       int64
	Missed, Owner, Overlap string
	Labels                 map[string]string
}

// Into sets s's fields from r: durations, policies, and the template's labels (none: nil) and
// payload (none: empty, not nil).
func (r ScheduleRow) Into(s *queue.Schedule) {
	s.Template.Timeout, s.Template.TTL = FromMillis(r.TimeoutMS), FromMillis(r.TTLMS)
	s.Overlap, s.Missed, s.Owner = queue.OverlapPolicy(r.Overlap), queue.MissedPolicy(r.Missed), queue.ScheduleOwner(r.Owner)
	if len(r.Labels) > 0 {
		s.Template.Labels = r.Labels
	}
	if s.Template.Payload == nil {
		s.Template.Payload = []byte{}
	}
}

// ReconcileSchedules is ScheduleReconcile's decisions, run inside the store's transaction: owners
// holds the owner of every config-owned schedule and of those named (names, p's); upsert writes
// one of p's schedules (takeOver: the row was another owner's, whose next fire time it replaces);
// remove deletes a config-owned schedule no longer named. Deleted comes sorted.
func ReconcileSchedules(p store.ScheduleReconcileParams, names []string, owners map[string]string,
	upsert func(sp store.ScheduleParams, takeOver bool) error, remove func(name, owner string) error) (store.ScheduleReconcileResult, error) {
	var res store.ScheduleReconcileResult
	for _, sp := range p.Schedules {
		prev, exists := owners[sp.Name]
		takeOver := exists && prev != string(queue.OwnerConfig)
		if err := upsert(sp, takeOver); err != nil {
			return res, err
		}
		switch {
		case !exists:
			res.Created = append(res.Created, sp.Name)
		case takeOver:
			res.TakenOver = append(res.TakenOver, sp.Name)
			res.Updated = append(res.Updated, sp.Name)
		default:
			res.Updated = append(res.Updated, sp.Name)
		}
	}
	for n, o := range owners {
		if o == string(queue.OwnerConfig) && !slices.Contains(names, n) {
			if err := remove(n, o); err != nil {
				return res, err
			}
			res.Deleted = append(res.Deleted, n)
		}
	}
	slices.Sort(res.Deleted)
	return res, nil
}

// ScheduleFireResults are ScheduleFire's results, given which fires' schedules were still due
// (due(i)) and the insert results of those fires' jobs in order, and the advances of the schedules
// that fired, to write in the same transaction.
func ScheduleFireResults(ps []store.ScheduleFireParams, due func(i int) bool, res []store.JobInsertResult) ([]store.ScheduleFireResult, []store.ScheduleAdvanceParams) {
	out := make([]store.ScheduleFireResult, len(ps))
	var adv []store.ScheduleAdvanceParams
	for i, p := range ps {
		if !due(i) {
			continue
		}
		out[i] = store.ScheduleFireResult{Fired: true, Jobs: res[:len(p.Jobs):len(p.Jobs)]}
		res = res[len(p.Jobs):]
		adv = append(adv, p.Advanced(out[i].Jobs))
	}
	return out, adv
}

// ScheduleFireKeep are the errors ScheduleFire returns as they are: an insert's refusals.
var ScheduleFireKeep = []error{queue.ErrQueueNotFound, queue.ErrInvalidArgument, queue.ErrIdempotencyConflict}
