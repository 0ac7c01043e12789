package admin

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"text/tabwriter"

	jqv1 "github.com/jq-dev/jq/api/gen/jq/v1"
	"github.com/jq-dev/jq/api/gen/jq/v1/jqv1connect"
	"github.com/jq-dev/jq/internal/buildinfo"
)

// errUnhealthy makes `status` exit non-zero after printing the report.
var errUnhealthy = errors.New("the system is unhealthy")

// Run prints the client's and the server's versions. The client line is
// printed even when the server cannot be reached.
func (c *VersionCmd) Run(re *runEnv) error {
	local := buildinfo.Get()
	if _, err := re.Client(); err != nil { // bad connection flags: nothing is printed
		return err
	}
	out, callErr := call(re, jqv1connect.AdminServiceClient.GetVersion, &jqv1.GetVersionRequest{})
	if re.globals.Output != "table" {
		if callErr != nil {
			return callErr
		}
		return re.printMessage(out, nil)
	}
	fmt.Fprintf(re.Stdout, "client: %s\n", local)
	if callErr != nil {
		return callErr
	}
	fmt.Fprintf(re.Stdout, "server: %s\n", cell(buildinfo.Info{Version: out.GetVersion(), Commit: out.GetCommit(), BuildTime: out.GetBuildTime(), GoVersion: out.GetGoVersion()}.String()))
	return nil
}

// Run prints the system health summary (FR-042) and fails when anything is
// unhealthy, so scripts and probes can rely on the exit code.
func (c *StatusCmd) Run(re *runEnv) error {
	if _, err := re.Client(); err != nil { // bad connection flags, not an unreachable server
		return err
	}
	st, err := call(re, jqv1connect.AdminServiceClient.GetStatus, &jqv1.GetStatusRequest{})
	if err != nil {
		if re.globals.Output == "table" {
			fmt.Fprintf(re.Stdout, "server  %s  unreachable\n", re.globals.ServerAddr)
		}
		return err
	}
	if err := re.printMessage(st, func(w io.Writer) error { return re.statusTable(w, st) }); err != nil {
		return err
	}
	for _, c := range st.GetComponents() {
		if !c.GetHealthy() {
			return fmt.Errorf("%w: %s: %s", errUnhealthy, c.GetName(), c.GetDetail())
		}
	}
	if !st.GetHealthy() {
		return errUnhealthy
	}
	return nil
}

func (re *runEnv) statusTable(w io.Writer, st *jqv1.GetStatusResponse) error {
	tw := newTable(w)
	fmt.Fprintf(tw, "server\t%s\t%s\tversion %s\n", re.globals.ServerAddr, re.paint(colGreen, "reachable"), cell(st.GetServerVersion()))
	for _, c := range st.GetComponents() {
		state := re.paint(colGreen, "ok")
		if !c.GetHealthy() {
			state = re.paint(colRed, "FAILING")
			if c.GetDegraded() {
				state = re.paint(colYellow, "DEGRADED")
			}
		}
		fmt.Fprintf(tw, "%s\t\t%s\t%s (%s)\n", cell(c.GetName()), state, cell(c.GetDetail()), shortDuration(c.GetLatency().AsDuration()))
	}
	if !slices.ContainsFunc(st.GetComponents(), func(c *jqv1.ComponentHealth) bool { return c.GetName() == "kafka" }) {
		// The server checks Kafka only when it relays events to it.
		store := "Postgres"
		if slices.ContainsFunc(st.GetComponents(), func(c *jqv1.ComponentHealth) bool { return c.GetName() == "sqlite" }) {
			store = "the embedded store"
		}
		fmt.Fprintf(tw, "kafka\t\t%s\tdisabled on the server (kafka.enabled: false): events stay in %s\n", re.paint(colDefault, "-"), store)
	}
	fmt.Fprintf(tw, "workers\t\t%s\t\n", re.paint(colDefault, fmt.Sprintf("%d active", st.GetActiveWorkers())))
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "QUEUE\tPENDING\tASSIGNED\tRUNNING\tFAILED\tDEAD_LETTERED\t")
	for _, q := range st.GetQueues() {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t\n", cell(q.GetQueue()), q.GetPending(), q.GetAssigned(), q.GetRunning(), q.GetFailed(), q.GetDeadLettered())
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, q := range st.GetQueues() {
		if q.GetWaiting() != "" {
			fmt.Fprintf(w, "%s %s: waiting: %s\n", re.paint(colYellow, "!"), cell(q.GetQueue()), cell(q.GetWaiting()))
		}
	}
	return nil
}
