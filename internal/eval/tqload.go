package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"

	tqv1 "github.com/jq-dev/jq/api/gen/taskqueue/v1"
	"github.com/jq-dev/jq/api/gen/taskqueue/v1/taskqueuev1connect"
	"github.com/jq-dev/jq/queue/handlers"
)

// Seed 003's operation mix, per job: SubmitJob (routed by client_request_id), then GetJobStatus
// polls every tqPollEvery until the job is terminal, then GetJobResult of a DONE job with its
// checksum verified; one job in tqCancelEvery is cancelled right after its submit (CancelJob).
// Status and result calls are routed by job_id, as seed 003's Design B requires.
const (
	tqPollEvery   = 100 * time.Millisecond
	tqCancelEvery = 20
	tqFollowers   = 256 // jobs followed at once; more wait for a follower
	tqFollowFor   = 2 * time.Minute
)

// tqClients are gRPC clients of the taskqueue.v1 facade over h2c, one per node (fixed order): what
// a client generated from seed 003's proto uses.
func tqClients(addrs ...string) []taskqueuev1connect.TaskQueuePublicServiceClient {
	p := new(http.Protocols)
	p.SetUnencryptedHTTP2(true)
	hc := &http.Client{Transport: &http.Transport{Protocols: p, DialContext: (&net.Dialer{}).DialContext}}
	out := make([]taskqueuev1connect.TaskQueuePublicServiceClient, len(addrs))
	for i, a := range addrs {
		out[i] = taskqueuev1connect.NewTaskQueuePublicServiceClient(hc, "http://"+a, connect.WithGRPC())
	}
	return out
}

// opStats are the RPC latencies and errors of one method.
type opStats struct {
	Calls  int     `json:"calls"`
	Errors int64   `json:"errors"`
	P50Ms  float64 `json:"p50_ms"`
	P99Ms  float64 `json:"p99_ms"`
}

// tqResult is what the operation mix measured besides the jobs' own timestamps.
type tqResult struct {
	loadResult
	Ops              map[string]opStats `json:"ops"`
	Cancelled        int                `json:"cancel_requests"`
	ResultsFetched   int64              `json:"results_fetched"`
	ChecksumMismatch int64              `json:"checksum_mismatches"` // output size or SHA-256 not as asked
	NotTerminal      int64              `json:"not_terminal_when_followed"`
}

type opRecorder struct {
	mu   sync.Mutex
	lat  map[string][]time.Duration
	errs map[string]*atomic.Int64
}

func newOpRecorder() *opRecorder {
	r := &opRecorder{lat: map[string][]time.Duration{}, errs: map[string]*atomic.Int64{}}
	for _, m := range []string{"SubmitJob", "GetJobStatus", "GetJobResult", "CancelJob"} {
		r.errs[m] = &atomic.Int64{}
	}
	return r
}

// call times one RPC.
func (r *opRecorder) call(method string, f func() error) error {
	t0 := time.Now()
	err := f()
	d := time.Since(t0)
	r.mu.Lock()
	r.lat[method] = append(r.lat[method], d)
	r.mu.Unlock()
	if err != nil {
		if r.errs[method].Add(1) <= 3 {
			fmt.Printf("  %s error: %v\n", method, err)
		}
	}
	return err
}

func (r *opRecorder) stats() map[string]opStats {
	out := map[string]opStats{}
	for m, l := range r.lat {
		slices.Sort(l)
		s := opStats{Calls: len(l), Errors: r.errs[m].Load()}
		if len(l) > 0 {
			s.P50Ms, s.P99Ms = ms(l[len(l)*50/100]), ms(l[min(len(l)-1, len(l)*99/100)])
		}
		out[m] = s
	}
	return out
}

// offerTQ offers the spec's jobs through the facade with seed 003's operation mix and returns once
// every job was followed to its end (or tqFollowFor passed for it).
func offerTQ(ctx context.Context, nodes []taskqueuev1connect.TaskQueuePublicServiceClient, s loadSpec) tqResult {
	rec := newOpRecorder()
	var next, fetched, mismatch, notTerminal, cancelled atomic.Int64
	perNode := make([]atomic.Int64, len(nodes))
	followers := make(chan struct{}, tqFollowers)
	var follow sync.WaitGroup
	start := time.Now()
	var wg sync.WaitGroup
	for range s.clients {
		wg.Go(func() {
			for ctx.Err() == nil {
				i := int(next.Add(1)) - 1
				if i >= len(s.jobs) {
					return
				}
				if s.rate > 0 { // open loop: job i is due at start + i/rate
					if d := time.Until(start.Add(time.Duration(float64(i) / s.rate * float64(time.Second)))); d > 0 {
						time.Sleep(d)
					}
				}
				key := s.runID + "-" + strconv.Itoa(i)
				owner := ownerIndex(key, len(nodes))
				perNode[owner].Add(1)
				spec := &tqv1.JobSpec{JobType: "eval", WorkDurationMs: uint32(s.jobs[i].ms), PayloadSizeBytes: uint32(s.jobs[i].size),
					Labels: map[string]string{"bench_run": s.runID}}
				var id string
				err := rec.call("SubmitJob", func() error {
					rctx, cancel := context.WithTimeout(ctx, 3*time.Second) // seed 003's SubmitJob deadline
					defer cancel()
					res, err := nodes[owner].SubmitJob(rctx, connect.NewRequest(&tqv1.SubmitJobRequest{Spec: spec, ClientRequestId: key}))
					if err == nil {
						id = res.Msg.GetJobId()
					}
					return err
				})
				if err != nil {
					continue
				}
				jobNode := nodes[ownerIndex(id, len(nodes))]
				if i%tqCancelEvery == tqCancelEvery-1 {
					cancelled.Add(1)
					_ = rec.call("CancelJob", func() error {
						rctx, cancel := context.WithTimeout(ctx, 3*time.Second)
						defer cancel()
						_, err := jobNode.CancelJob(rctx, connect.NewRequest(&tqv1.CancelJobRequest{JobId: id, Reason: "eval"}))
						return err
					})
				}
				followers <- struct{}{}
				follow.Go(func() {
					defer func() { <-followers }()
					st := followJob(ctx, jobNode, rec, id)
					switch {
					case st == tqv1.JobStatus_DONE:
						if fetchResult(ctx, jobNode, rec, id, s.jobs[i].size) {
							fetched.Add(1)
						} else {
							mismatch.Add(1)
						}
					case st != tqv1.JobStatus_CANCELED && st != tqv1.JobStatus_FAILED:
						notTerminal.Add(1)
					}
				})
			}
		})
	}
	wg.Wait()
	submitSeconds := time.Since(start).Seconds()
	follow.Wait()
	ops := rec.stats()
	r := tqResult{
		loadResult: loadResult{Submitted: len(s.jobs), SubmitErrors: ops["SubmitJob"].Errors, SubmitSeconds: submitSeconds,
			SubmitRPCP50: ops["SubmitJob"].P50Ms, SubmitRPCP99: ops["SubmitJob"].P99Ms},
		Ops: ops, Cancelled: int(cancelled.Load()), ResultsFetched: fetched.Load(),
		ChecksumMismatch: mismatch.Load(), NotTerminal: notTerminal.Load(),
	}
	for i := range perNode {
		r.PerNode = append(r.PerNode, int(perNode[i].Load()))
	}
	return r
}

// followJob polls GetJobStatus until the job is terminal and returns its last status.
func followJob(ctx context.Context, c taskqueuev1connect.TaskQueuePublicServiceClient, rec *opRecorder, id string) tqv1.JobStatus {
	deadline := time.Now().Add(tqFollowFor)
	st := tqv1.JobStatus_JOB_STATUS_UNSPECIFIED
	for ctx.Err() == nil && time.Now().Before(deadline) {
		_ = rec.call("GetJobStatus", func() error {
			rctx, cancel := context.WithTimeout(ctx, time.Second) // seed 003's GetJobStatus deadline
			defer cancel()
			res, err := c.GetJobStatus(rctx, connect.NewRequest(&tqv1.GetJobStatusRequest{JobId: id}))
			if err == nil {
				st = res.Msg.GetStatus()
			}
			return err
		})
		switch st {
		case tqv1.JobStatus_DONE, tqv1.JobStatus_FAILED, tqv1.JobStatus_CANCELED:
			return st
		}
		select {
		case <-ctx.Done():
		case <-time.After(tqPollEvery):
		}
	}
	return st
}

// fetchResult calls GetJobResult and checks the output: the asked size, its SHA-256 the checksum.
func fetchResult(ctx context.Context, c taskqueuev1connect.TaskQueuePublicServiceClient, rec *opRecorder, id string, size int) bool {
	var res *tqv1.GetJobResultResponse
	err := rec.call("GetJobResult", func() error {
		rctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		r, err := c.GetJobResult(rctx, connect.NewRequest(&tqv1.GetJobResultRequest{JobId: id}))
		if err == nil {
			res = r.Msg
		}
		return err
	})
	if err != nil {
		return false
	}
	return resultMatches(res, id, size)
}

// resultMatches reports whether a DONE job's result is the synthetic handler's output for it.
func resultMatches(res *tqv1.GetJobResultResponse, id string, size int) bool {
	sum := sha256.Sum256(res.GetOutputBytes())
	return res.GetResultReady() && len(res.GetOutputBytes()) == size &&
		hex.EncodeToString(sum[:]) == res.GetChecksum() &&
		string(res.GetOutputBytes()) == string(handlers.SyntheticOutput(id, size))
}
