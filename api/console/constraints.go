package console

import (
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	"github.com/jq-dev/jq/api"
	jqv1 "github.com/jq-dev/jq/api/gen/jq/v1"
	"github.com/jq-dev/jq/queue"
)

// topKeys is how many of a constraint's busiest keys its page shows.
const topKeys = 20

// constraintForm is the create form's fields as the page shows them: empty for a new
// constraint, a constraint's own on its page (to replace it).
type constraintForm struct {
	Name, Queue, Type, Labels, Key, Concurrency, Rate, Burst string
	Replace                                                  bool
}

// constraintsData is the constraints page: every constraint with its usage, and the create form.
type constraintsData struct {
	Constraints []*jqv1.ConstraintSummary
	Form        constraintForm
}

func (c *Console) constraintsPage(w http.ResponseWriter, r *http.Request, u *user) {
	ctx, cancel := u.ctx(r)
	defer cancel()
	resp, err := c.api.constraints.ListConstraints(ctx, connect.NewRequest(&jqv1.ListConstraintsRequest{}))
	if err != nil {
		c.fail(w, r, u, "Constraints", err)
		return
	}
	d := constraintsData{Constraints: resp.Msg.GetConstraints()}
	c.render(w, r, u, http.StatusOK, "constraints", view{Title: "Constraints", Nav: "constraints", Live: true, Data: &d})
}

// constraintData is one constraint's page: its definition, its usage with the busiest keys, and
// the form to replace it.
type constraintData struct {
	Constraint *jqv1.Constraint
	Usage      *jqv1.ConstraintUsage
	Form       constraintForm
}

func (c *Console) constraintPage(w http.ResponseWriter, r *http.Request, u *user) {
	ctx, cancel := u.ctx(r)
	defer cancel()
	name := r.PathValue("name")
	resp, err := c.api.constraints.GetConstraint(ctx, connect.NewRequest(&jqv1.GetConstraintRequest{Name: name, Top: proto.Int32(topKeys)}))
	if err != nil {
		c.fail(w, r, u, "Constraint", err)
		return
	}
	con := resp.Msg.GetConstraint()
	d := constraintData{Constraint: con, Usage: resp.Msg.GetUsage(), Form: formOf(con)}
	c.render(w, r, u, http.StatusOK, "constraint", view{Title: "Constraint " + con.GetName(), Nav: "constraints", Live: true, Data: &d})
}

// formOf is a constraint as the create form reads it, with replace ticked.
func formOf(con *jqv1.Constraint) constraintForm {
	f := constraintForm{Name: con.GetName(), Queue: con.GetMatch().GetQueue(), Type: con.GetMatch().GetType(), Key: con.GetKey(), Replace: true}
	labels := con.GetMatch().GetLabels()
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		f.Labels += k + "=" + labels[k] + "\n"
	}
	if n := con.GetConcurrency(); n > 0 {
		f.Concurrency = strconv.Itoa(int(n))
	}
	if rate := api.ConstraintFromRecord(con).Rate; !rate.IsZero() {
		if rate.Burst > 0 {
			f.Burst = strconv.Itoa(rate.Burst)
		}
		rate.Burst = 0
		f.Rate = rate.String()
	}
	return f
}

func invalid(format string, args ...any) error {
	return connect.NewError(connect.CodeInvalidArgument, fmt.Errorf(format, args...))
}

// constraintRequest reads the create form. Only what the form itself must parse is checked
// here (numbers, the rate, label lines); every rule of a constraint is the API's.
func constraintRequest(form url.Values) (*jqv1.CreateConstraintRequest, error) {
	get := func(k string) string { return strings.TrimSpace(form.Get(k)) }
	req := &jqv1.CreateConstraintRequest{
		Name:    get("name"),
		Match:   &jqv1.JobMatcher{Queue: get("queue"), Type: get("type")},
		Key:     get("key"),
		Replace: form.Get("replace") == "yes",
	}
	labels, err := labelLines(form.Get("labels"))
	if err != nil {
		return nil, err
	}
	req.Match.Labels = labels
	if s := get("concurrency"); s != "" {
		n, err := strconv.ParseInt(s, 10, 32)
		if err != nil || n < 0 || n > queue.MaxConstraintLimit {
			return nil, invalid("concurrency %q: want a whole number from 0 to %d", oneLine(s, 20), queue.MaxConstraintLimit)
		}
		req.Concurrency = int32(n)
	}
	rate, burst := get("rate"), get("burst")
	if rate == "" {
		if burst != "" {
			return nil, invalid("burst applies to a rate only")
		}
		return req, nil
	}
	rl, err := queue.ParseRate(rate)
	if err != nil {
		return nil, invalid("%s", strings.TrimPrefix(err.Error(), queue.ErrInvalidArgument.Error()+": "))
	}
	if burst != "" {
		n, err := strconv.Atoi(burst)
		if err != nil || n < 0 || n > queue.MaxConstraintLimit {
			return nil, invalid("burst %q: want a whole number from 0 to %d", oneLine(burst, 20), queue.MaxConstraintLimit)
		}
		rl.Burst = n
	}
	req.Rate = api.RateProto(rl)
	return req, nil
}

// labelLines reads the labels a matcher requires: key=value, one a line, or comma-separated on
// a single line (as the list filters take them). A value with a comma needs a line of its own.
func labelLines(s string) (map[string]string, error) {
	s = strings.TrimSpace(strings.ReplaceAll(s, "\r\n", "\n"))
	if s == "" {
		return nil, nil
	}
	sep := ","
	if strings.Contains(s, "\n") {
		sep = "\n"
	}
	labels := map[string]string{}
	for part := range strings.SplitSeq(s, sep) {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		k, v, ok := strings.Cut(part, "=")
		if !ok || k == "" {
			return nil, invalid("label %q: want key=value, one a line or comma-separated", oneLine(part, 60))
		}
		if _, dup := labels[k]; dup {
			return nil, invalid("label %q given twice: a job has one value of it", oneLine(k, 60))
		}
		labels[k] = v
	}
	return labels, nil
}

func (c *Console) constraintCreate(w http.ResponseWriter, r *http.Request, u *user) {
	to := back(r, "/constraints")
	if !confirmed(r) {
		c.done(w, r, to, errNotConfirmed, "")
		return
	}
	req, err := constraintRequest(r.PostForm)
	if err != nil {
		c.done(w, r, to, err, "")
		return
	}
	ctx, cancel := u.ctx(r)
	defer cancel()
	resp, err := c.api.constraints.CreateConstraint(ctx, connect.NewRequest(req))
	c.logAction(u, "constraint_create", req.GetName(), err)
	msg := ""
	if err == nil {
		con := resp.Msg.GetConstraint()
		word := "created"
		if req.GetReplace() {
			word = "created or replaced"
		}
		_, def, _ := strings.Cut(api.ConstraintFromRecord(con).String(), ":")
		msg, to = "constraint "+con.GetName()+" "+word+":"+def, "/constraints/"+pathSeg(con.GetName())
	}
	c.done(w, r, to, err, msg)
}

func (c *Console) constraintDelete(w http.ResponseWriter, r *http.Request, u *user) {
	name := r.PostFormValue("name")
	to := back(r, "/constraints/"+pathSeg(name))
	if !confirmed(r) {
		c.done(w, r, to, errNotConfirmed, "")
		return
	}
	ctx, cancel := u.ctx(r)
	defer cancel()
	_, err := c.api.constraints.DeleteConstraint(ctx, connect.NewRequest(&jqv1.DeleteConstraintRequest{Name: name}))
	c.logAction(u, "constraint_delete", name, err)
	if err == nil {
		to = "/constraints" // its own page is gone
	}
	c.done(w, r, to, err, "constraint "+name+" deleted")
}

// rateText is a constraint's rate as the form takes it ("100/m,burst=20"); "—" without one.
func rateText(con *jqv1.Constraint) string {
	if con.GetRate() == nil {
		return "—"
	}
	return api.ConstraintFromRecord(con).Rate.String()
}

// keyRunning is a key's running jobs against the constraint's concurrency ("2 / 2"), or the bare
// count without a concurrency limit.
func keyRunning(con *jqv1.Constraint, n int32) string {
	if con.GetConcurrency() == 0 {
		return strconv.Itoa(int(n))
	}
	return fmt.Sprintf("%d / %d", n, con.GetConcurrency())
}
