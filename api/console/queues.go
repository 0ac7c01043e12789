package console

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/jq-dev/jq/api"
	jqv1 "github.com/jq-dev/jq/api/gen/jq/v1"
)

// queueForm is a queue's settings as its page's edit form shows them: durations in Go's notation
// ("5m0s"), "" for none.
type queueForm struct {
	MaxRetries, TTL, Weights, BackoffBase, BackoffMax, ResultRetention, MaxWait string
}

func queueFormOf(q *jqv1.Queue) queueForm {
	d := func(v *durationpb.Duration) string {
		if v == nil || v.AsDuration() == 0 {
			return ""
		}
		return v.AsDuration().String()
	}
	return queueForm{
		MaxRetries: strconv.Itoa(int(q.GetMaxRetries())), TTL: d(q.GetTtl()), Weights: api.FormatPriorityWeights(q.GetPriorityWeights()),
		BackoffBase: d(q.GetBackoffBase()), BackoffMax: d(q.GetBackoffMax()), ResultRetention: d(q.GetResultRetention()), MaxWait: d(q.GetMaxWait()),
	}
}

// queueUpdateRequest reads the edit form. Every field is sent: the form shows the current values,
// so an untouched field changes nothing, and an emptied one removes the setting (TTL, max wait,
// weights) or restores its default (backoff, retention). The rules are the API's.
func queueUpdateRequest(form url.Values) (*jqv1.UpdateQueueRequest, error) {
	get := func(k string) string { return strings.TrimSpace(form.Get(k)) }
	req := &jqv1.UpdateQueueRequest{Name: get("name")}
	if s := get("max_retries"); s != "" {
		n, err := strconv.ParseInt(s, 10, 32)
		if err != nil {
			return nil, invalid("max retries %q: want a whole number", oneLine(s, 20))
		}
		n32 := int32(n)
		req.MaxRetries = &n32
	}
	for _, f := range []struct {
		key, label string
		dst        **durationpb.Duration
	}{{"ttl", "TTL", &req.Ttl}, {"backoff_base", "backoff base", &req.BackoffBase}, {"backoff_max", "backoff max", &req.BackoffMax},
		{"result_retention", "result retention", &req.ResultRetention}, {"max_wait", "max wait", &req.MaxWait}} {
		var v time.Duration
		if s := get(f.key); s != "" {
			var err error
			if v, err = time.ParseDuration(s); err != nil {
				return nil, invalid("%s %q: want a duration such as 90s, 5m or 1h30m", f.label, oneLine(s, 20))
			}
		}
		*f.dst = durationpb.New(v)
	}
	w, err := api.ParsePriorityWeights(get("weights"))
	if err != nil {
		return nil, invalid("priority weights %v", err)
	}
	req.PriorityWeights = &jqv1.PriorityWeights{Weights: w}
	return req, nil
}

// queueUpdate changes a queue's settings from its page's edit form.
func (c *Console) queueUpdate(w http.ResponseWriter, r *http.Request, u *user) {
	name := r.PostFormValue("name")
	to := back(r, "/queues/"+pathSeg(name))
	if !confirmed(r) {
		c.done(w, r, to, errNotConfirmed, "")
		return
	}
	req, err := queueUpdateRequest(r.PostForm)
	if err == nil {
		ctx, cancel := u.ctx(r)
		defer cancel()
		_, err = c.api.queues.UpdateQueue(ctx, connect.NewRequest(req))
	}
	c.logAction(u, "queue_update", name, err)
	c.done(w, r, to, err, "queue "+name+" updated")
}
