package admin

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"

	"google.golang.org/protobuf/proto"

	"github.com/jq-dev/jq/api"
	jqv1 "github.com/jq-dev/jq/api/gen/jq/v1"
	"github.com/jq-dev/jq/api/gen/jq/v1/jqv1connect"
	"github.com/jq-dev/jq/queue"
)

// ConstraintCmd groups the constraint commands (docs/flow-control.md).
type ConstraintCmd struct {
	Create ConstraintCreateCmd `cmd:"" help:"Create (or with --replace replace) a constraint: at most --concurrency jobs running and --rate starts, per key, of the jobs --match selects."`
	List   ConstraintListCmd   `cmd:"" help:"List constraints with the jobs running under each and their number of busy keys."`
	Show   ConstraintShowCmd   `cmd:"" help:"Show a constraint: matcher, key, limits, jobs running, and its busiest keys with their running jobs and rate tokens."`
	Delete ConstraintDeleteCmd `cmd:"" help:"Delete a constraint: the jobs it held back are dispatched as if it never existed."`
}

// ConstraintCreateCmd is `constraint create`.
type ConstraintCreateCmd struct {
	Name        string   `arg:"" help:"Constraint name: lower-case letters, digits, '_', '.', '-'."`
	Match       []string `help:"A condition the jobs must meet (repeatable, all must hold): queue=NAME, type=PATTERN (exact or a glob: email.*) or label:NAME=VALUE. None: every job." sep:"none" placeholder:"K=V"`
	Key         string   `placeholder:"TEMPLATE" help:"Key template: one limit per distinct key, from {{.labels.NAME}} and {{.payload.PATH}} (e.g. '{{.labels.tenant}}'). Empty: one limit for every matched job."`
	Concurrency int      `help:"At most this many matched jobs of one key ASSIGNED or RUNNING at once (0: no concurrency limit)."`
	Rate        string   `help:"At most N starts of one key per interval: N/s, N/m, N/h, N/d or N/<duration> (100/10s), optionally ',burst=B'." placeholder:"N/INTERVAL"`
	Burst       *int     `placeholder:"B" help:"Size of the rate's token bucket: starts allowed at once after a quiet spell (default: N of --rate)."`
	Replace     bool     `help:"Replace the constraint of that name instead of failing when it exists."`
}

// ConstraintListCmd is `constraint list`.
type ConstraintListCmd struct{}

// ConstraintShowCmd is `constraint show`.
type ConstraintShowCmd struct {
	Name string `arg:"" help:"Constraint name." predictor:"constraint"`
	Top  int    `help:"How many of the busiest keys to show, 0-100." default:"10"`
}

// ConstraintDeleteCmd is `constraint delete`.
type ConstraintDeleteCmd struct {
	Name string `arg:"" help:"Constraint name." predictor:"constraint"`
}

// request builds the CreateConstraint request from the flags; a malformed flag is a usage error.
func (c *ConstraintCreateCmd) request() (*jqv1.CreateConstraintRequest, error) {
	m, err := parseMatch(c.Match)
	if err != nil {
		return nil, err
	}
	req := &jqv1.CreateConstraintRequest{Name: c.Name, Match: m, Key: c.Key, Replace: c.Replace}
	if c.Concurrency < 0 || c.Concurrency > queue.MaxConstraintLimit {
		return nil, usagef("--concurrency %d: want 0 to %d", c.Concurrency, queue.MaxConstraintLimit)
	}
	req.Concurrency = int32(c.Concurrency)
	if c.Rate == "" {
		if c.Burst != nil {
			return nil, usagef("--burst applies to --rate only")
		}
		return req, nil
	}
	r, err := queue.ParseRate(c.Rate)
	if err != nil {
		return nil, usagef("--%s", strings.TrimPrefix(err.Error(), queue.ErrInvalidArgument.Error()+": "))
	}
	if c.Burst != nil {
		if *c.Burst < 0 || *c.Burst > queue.MaxConstraintLimit {
			return nil, usagef("--burst %d: want 0 to %d", *c.Burst, queue.MaxConstraintLimit)
		}
		r.Burst = *c.Burst
	}
	req.Rate = api.RateProto(r)
	return req, nil
}

// parseMatch reads --match conditions: queue=NAME, type=PATTERN, label:NAME=VALUE.
func parseMatch(conds []string) (*jqv1.JobMatcher, error) {
	m := &jqv1.JobMatcher{}
	for _, cond := range conds {
		k, v, ok := strings.Cut(cond, "=")
		switch {
		case !ok:
			return nil, usagef("--match %q: want queue=NAME, type=PATTERN or label:NAME=VALUE", cond)
		case k == "queue" && m.Queue == "":
			m.Queue = v
		case k == "type" && m.Type == "":
			m.Type = v
		case k == "queue" || k == "type":
			return nil, usagef("--match %s= given twice: a job has one %s", k, k)
		case strings.HasPrefix(k, "label:") && len(k) > len("label:"):
			name := strings.TrimPrefix(k, "label:")
			if m.Labels == nil {
				m.Labels = map[string]string{}
			}
			if _, dup := m.Labels[name]; dup {
				return nil, usagef("--match label:%s= given twice", name)
			}
			m.Labels[name] = v
		default:
			return nil, usagef("--match %q: want queue=NAME, type=PATTERN or label:NAME=VALUE", cond)
		}
	}
	return m, nil
}

// Run creates a constraint.
func (c *ConstraintCreateCmd) Run(re *runEnv) error {
	req, err := c.request()
	if err != nil {
		return err
	}
	resp, err := call(re, jqv1connect.ConstraintServiceClient.CreateConstraint, req)
	if err != nil {
		if errors.Is(err, queue.ErrConstraintExists) {
			return fmt.Errorf("constraint %q already exists (--replace replaces it)", c.Name)
		}
		return failed(refusal(err), "cannot create constraint %q", c.Name)
	}
	return re.printMessage(resp, func(w io.Writer) error {
		word := "created"
		if c.Replace {
			word = "created or replaced"
		}
		_, err := fmt.Fprintf(w, "constraint %s %s: %s\n", cell(resp.GetConstraint().GetName()), word, describe(resp.GetConstraint()))
		return err
	})
}

// Run lists the constraints.
func (c *ConstraintListCmd) Run(re *runEnv) error {
	resp, err := call(re, jqv1connect.ConstraintServiceClient.ListConstraints, &jqv1.ListConstraintsRequest{})
	if err != nil {
		return err
	}
	return re.printMessage(resp, func(w io.Writer) error {
		tw := newTable(w)
		fmt.Fprintf(tw, "NAME\tMATCH\tKEY\tCONCURRENCY\tRATE\tRUNNING\tKEYS\n")
		for _, s := range resp.GetConstraints() {
			con, u := s.GetConstraint(), s.GetUsage()
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%d\n", cell(con.GetName()), matchText(con.GetMatch()), dash(con.GetKey()),
				concurrencyText(con), rateText(con), u.GetRunning(), u.GetKeys())
		}
		return tw.Flush()
	})
}

// Run shows one constraint with its usage.
func (c *ConstraintShowCmd) Run(re *runEnv) error {
	if c.Top < 0 || c.Top > 100 {
		return usagef("--top %d: want 0 to 100", c.Top)
	}
	resp, err := call(re, jqv1connect.ConstraintServiceClient.GetConstraint, &jqv1.GetConstraintRequest{Name: c.Name, Top: proto.Int32(int32(c.Top))})
	if err != nil {
		return named(err, "constraint", c.Name)
	}
	return re.printMessage(resp, func(w io.Writer) error {
		con, u := resp.GetConstraint(), resp.GetUsage()
		tw := newTable(w)
		row := func(k string, v any) { fmt.Fprintf(tw, "%s\t%v\n", k, v) }
		row("NAME", cell(con.GetName()))
		row("MATCH", matchText(con.GetMatch()))
		row("KEY", dash(con.GetKey()))
		row("CONCURRENCY", concurrencyText(con))
		row("RATE", rateText(con))
		row("RUNNING", u.GetRunning())
		row("KEYS", u.GetKeys())
		row("CREATED", re.when(con.GetCreatedAt()))
		row("UPDATED", re.when(con.GetUpdatedAt()))
		if err := tw.Flush(); err != nil {
			return err
		}
		if len(u.GetTop()) == 0 {
			return nil
		}
		fmt.Fprintln(w)
		tw = newTable(w)
		fmt.Fprintf(tw, "KEY\tRUNNING\tTOKENS\n")
		for _, k := range u.GetTop() {
			tokens := "-"
			if con.GetRate() != nil {
				tokens = strconv.FormatFloat(k.GetTokens(), 'f', 1, 64)
			}
			key := k.GetKey()
			if con.GetKey() == "" {
				key = "(all)"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\n", dash(key), runningText(con, k.GetRunning()), tokens)
		}
		return tw.Flush()
	})
}

// Run deletes a constraint.
func (c *ConstraintDeleteCmd) Run(re *runEnv) error {
	resp, err := call(re, jqv1connect.ConstraintServiceClient.DeleteConstraint, &jqv1.DeleteConstraintRequest{Name: c.Name})
	if err != nil {
		return failed(named(err, "constraint", c.Name), "cannot delete constraint %q", c.Name)
	}
	return re.printMessage(resp, func(w io.Writer) error {
		_, err := fmt.Fprintf(w, "constraint %s deleted\n", cell(c.Name))
		return err
	})
}

// describe is a constraint on one line, as queue.Constraint.String writes it, without its name.
func describe(c *jqv1.Constraint) string {
	s := api.ConstraintFromRecord(c).String()
	_, rest, _ := strings.Cut(s, ":")
	return cell(strings.TrimSpace(rest))
}

// matchText is a matcher as --match reads it: "queue=q type=email label:tenant=acme"; "*" for
// every job.
func matchText(m *jqv1.JobMatcher) string {
	var parts []string
	if m.GetQueue() != "" {
		parts = append(parts, "queue="+m.GetQueue())
	}
	if m.GetType() != "" {
		parts = append(parts, "type="+m.GetType())
	}
	for _, k := range slices.Sorted(maps.Keys(m.GetLabels())) {
		parts = append(parts, "label:"+k+"="+m.GetLabels()[k])
	}
	if len(parts) == 0 {
		return "*"
	}
	return cell(strings.Join(parts, " "))
}

func concurrencyText(c *jqv1.Constraint) string {
	if c.GetConcurrency() == 0 {
		return "-"
	}
	return strconv.Itoa(int(c.GetConcurrency()))
}

func rateText(c *jqv1.Constraint) string {
	if c.GetRate() == nil {
		return "-"
	}
	return api.ConstraintFromRecord(c).Rate.String()
}

// runningText is a key's running jobs, against the concurrency when there is one: "5/5".
func runningText(c *jqv1.Constraint, n int32) string {
	if c.GetConcurrency() == 0 {
		return strconv.Itoa(int(n))
	}
	return fmt.Sprintf("%d/%d", n, c.GetConcurrency())
}
