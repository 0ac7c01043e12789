package admin

import (
	"context"
	"slices"
	"time"

	jqv1 "github.com/jq-dev/jq/api/gen/jq/v1"
	"github.com/jq-dev/jq/api/gen/jq/v1/jqv1connect"
)

// Name kinds a server knows, completed from its answers (the predictor tags of the grammar).
const (
	NamesQueue      = "queue"
	NamesSchedule   = "schedule"
	NamesConstraint = "constraint"
	NamesWorker     = "worker"
)

// completionTimeout bounds the one request a completion makes: a shell waits for it at every Tab,
// so a server that does not answer quickly offers nothing rather than a hang.
const completionTimeout = time.Second

// Names lists the names of kind (NamesQueue, …) that the server named by g knows, sorted; nil
// when it cannot be asked or does not answer within a second. It is what a shell completes after
// `jq queue pause ` or `--queue `.
func Names(ctx context.Context, kind string, g Globals) []string {
	g.Timeout = completionTimeout
	re := &runEnv{ctx: ctx, globals: &g, now: time.Now}
	defer func() {
		if re.client != nil {
			re.client.Close()
		}
	}()
	var names []string
	switch kind {
	case NamesQueue:
		resp, err := call(re, jqv1connect.QueueServiceClient.ListQueues, &jqv1.ListQueuesRequest{})
		if err != nil {
			return nil
		}
		for _, q := range resp.GetQueues() {
			names = append(names, q.GetName())
		}
	case NamesSchedule:
		resp, err := call(re, jqv1connect.ScheduleServiceClient.ListSchedules, &jqv1.ListSchedulesRequest{})
		if err != nil {
			return nil
		}
		for _, s := range resp.GetSchedules() {
			names = append(names, s.GetName())
		}
	case NamesConstraint:
		resp, err := call(re, jqv1connect.ConstraintServiceClient.ListConstraints, &jqv1.ListConstraintsRequest{})
		if err != nil {
			return nil
		}
		for _, c := range resp.GetConstraints() {
			names = append(names, c.GetConstraint().GetName())
		}
	case NamesWorker:
		resp, err := call(re, jqv1connect.WorkerServiceClient.ListWorkers, &jqv1.ListWorkersRequest{PageSize: 1000})
		if err != nil {
			return nil
		}
		for _, w := range resp.GetWorkers() {
			names = append(names, w.GetId())
		}
	}
	slices.Sort(names)
	return slices.Compact(names)
}
