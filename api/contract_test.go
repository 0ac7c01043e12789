package api_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"

	jqv1 "github.com/jq-dev/jq/api/gen/jq/v1"
	"github.com/jq-dev/jq/api/gen/jq/v1/jqv1connect"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// The services and RPCs other packages are written against, in declaration
// order. StreamJobs, WatchJob and WatchEvents are the streaming RPCs (server streaming).
var wantServices = map[string][]string{
	"jq.v1.JobService": {
		"SubmitJob", "SubmitJobs", "GetJob", "ListJobs", "CancelJob", "RetryJob", "DeleteJob",
		"ListJobEvents", "GetJobResult", "WatchJob", "WatchEvents",
	},
	"jq.v1.QueueService": {
		"CreateQueue", "DeleteQueue", "ListQueues", "GetQueue", "GetQueueStats",
		"PauseQueue", "ResumeQueue", "UpdateQueue",
	},
	"jq.v1.WorkerService": {
		"RegisterWorker", "Heartbeat", "StreamJobs", "AckJobs", "ReportJobs", "ReportProgress",
		"DeregisterWorker", "ListWorkers", "DrainWorker", "ShutdownWorker", "ResumeWorker",
	},
	"jq.v1.AdminService": {
		"GetStatus", "GetVersion", "GetStats", "PeekQueue", "PurgeDeadLetters",
	},
	"jq.v1.ScheduleService": {
		"CreateSchedule", "UpdateSchedule", "ListSchedules", "GetSchedule", "PauseSchedule", "ResumeSchedule",
		"TriggerSchedule", "DeleteSchedule",
	},
	"jq.v1.ConstraintService": {
		"CreateConstraint", "ListConstraints", "GetConstraint", "DeleteConstraint",
	},
}

var serverStreamingRPCs = map[string]bool{
	"jq.v1.WorkerService.StreamJobs": true, "jq.v1.JobService.WatchJob": true, "jq.v1.JobService.WatchEvents": true,
}

func TestServices(t *testing.T) {
	t.Parallel()

	var got []string
	protoregistry.GlobalFiles.RangeFilesByPackage("jq.v1", func(fd protoreflect.FileDescriptor) bool {
		require.Equal(t, "github.com/jq-dev/jq/api/gen/jq/v1;jqv1", goPackage(t, fd), fd.Path())
		for i := range fd.Services().Len() {
			got = append(got, string(fd.Services().Get(i).FullName()))
		}
		return true
	})
	require.ElementsMatch(t, keys(wantServices), got, "services of package jq.v1")

	for svcName, wantMethods := range wantServices {
		svc := findService(t, svcName)
		methods := svc.Methods()
		var names []string
		for i := range methods.Len() {
			m := methods.Get(i)
			names = append(names, string(m.Name()))

			require.Equal(t, string(m.Name())+"Request", string(m.Input().Name()), m.FullName())
			require.Equal(t, string(m.Name())+"Response", string(m.Output().Name()), m.FullName())
			require.Equal(t, svc.ParentFile().Path(), m.Input().ParentFile().Path(),
				"%s: request declared next to its service", m.FullName())
			require.False(t, m.IsStreamingClient(), "%s must not be client streaming", m.FullName())
			require.Equal(t, serverStreamingRPCs[string(m.FullName())], m.IsStreamingServer(),
				"%s server streaming", m.FullName())
		}
		require.Equal(t, wantMethods, names, svcName)
	}
}

func TestEnums(t *testing.T) {
	t.Parallel()

	tests := []struct {
		enum protoreflect.EnumDescriptor
		want []string // value names, numbered from 0 in order
	}{
		{jqv1.JobState(0).Descriptor(), []string{
			"JOB_STATE_UNSPECIFIED", "JOB_STATE_PENDING", "JOB_STATE_ASSIGNED", "JOB_STATE_RUNNING",
			"JOB_STATE_DONE", "JOB_STATE_FAILED", "JOB_STATE_DEAD_LETTERED",
		}},
		{jqv1.WorkerStatus(0).Descriptor(), []string{
			"WORKER_STATUS_UNSPECIFIED", "WORKER_STATUS_ONLINE", "WORKER_STATUS_DRAINING", "WORKER_STATUS_OFFLINE",
		}},
		{jqv1.WorkerCommand(0).Descriptor(), []string{
			"WORKER_COMMAND_UNSPECIFIED", "WORKER_COMMAND_DRAIN", "WORKER_COMMAND_SHUTDOWN",
		}},
	}
	for _, tt := range tests {
		t.Run(string(tt.enum.Name()), func(t *testing.T) {
			t.Parallel()
			values := tt.enum.Values()
			var got []string
			for i := range values.Len() {
				v := values.Get(i)
				require.EqualValues(t, i, v.Number(), v.FullName())
				got = append(got, string(v.Name()))
			}
			require.Equal(t, tt.want, got)
		})
	}

	// The store and the CLI spell states without the prefix; keep that mapping trivial.
	require.Equal(t, "DEAD_LETTERED",
		strings.TrimPrefix(jqv1.JobState_JOB_STATE_DEAD_LETTERED.String(), "JOB_STATE_"))
}

// TestFields pins the fields other code is written against: name and type.
// A message may gain fields; these may not change.
func TestFields(t *testing.T) {
	t.Parallel()

	const (
		dur = "google.protobuf.Duration"
		ts  = "google.protobuf.Timestamp"
		ss  = "map<string,string>"
	)
	tests := map[string]map[string]string{
		"JobSpec": {
			"queue": "string", "type": "string", "payload": "bytes", "priority": "int32",
			"max_retries": "optional int32", "ttl": dur, "run_at": ts, "timeout": dur,
			"idempotency_key": "string", "labels": ss, "keep_result": "bool", "trace_context": ss,
		},
		"Job": {
			"id": "string", "queue": "string", "type": "string", "payload": "bytes", "priority": "int32",
			"state": "jq.v1.JobState", "max_retries": "int32", "retry_count": "int32", "attempt": "int32",
			"ttl": dur, "run_at": ts, "not_before": ts, "timeout": dur, "idempotency_key": "string",
			"labels": ss, "keep_result": "bool", "worker_id": "string", "last_error": "string",
			"failure_reason": "string", "created_at": ts, "updated_at": ts, "started_at": ts,
			"completed_at": ts, "result": "jq.v1.JobResult", "progress": "jq.v1.JobProgress",
		},
		"JobProgress": {"percent": "int32", "message": "string", "updated_at": ts},
		"JobResult":   {"data": "bytes", "checksum_sha256": "string", "runtime": dur, "completed_at": ts},
		"JobEvent": {
			"job_id": "string", "queue": "string", "seq": "int64", "from_state": "jq.v1.JobState",
			"to_state": "jq.v1.JobState", "timestamp": ts, "worker_id": "string", "reason": "string",
			"attempt": "int32", "type": "string",
		},
		"ListJobsRequest": {
			"queue": "string", "states": "repeated jq.v1.JobState", "page_size": "int32",
			"page_token": "string", "labels": ss, "include_payloads": "bool", "type": "string",
			"created_after": ts, "created_before": ts, "completed_after": ts, "completed_before": ts,
			"scheduled": "bool",
		},
		"Queue": {
			"name": "string", "max_retries": "int32", "ttl": dur, "priority_weights": "map<int32,int32>",
			"backoff_base": dur, "backoff_max": dur, "paused": "bool", "created_at": ts, "updated_at": ts,
		},
		"CreateQueueRequest": {
			"name": "string", "max_retries": "optional int32", "ttl": dur,
			"priority_weights": "map<int32,int32>", "backoff_base": dur, "backoff_max": dur,
		},
		"QueueStats": {
			"queue": "string", "pending": "int64", "assigned": "int64", "running": "int64", "done": "int64",
			"failed": "int64", "dead_lettered": "int64", "total_processed": "int64",
			"avg_processing_time": dur, "error_rate": "double", "oldest_pending_age": dur,
			"done_estimated": "bool", "window": dur, "finished": "int64", "failed_attempts": "int64",
			"finished_last_minute": "int64", "failed_last_minute": "int64",
		},
		"Worker": {
			"id": "string", "hostname": "string", "status": "jq.v1.WorkerStatus", "concurrency": "int32",
			"queues": "repeated string", "running_jobs": "int32", "version": "string",
			"started_at": ts, "last_heartbeat_at": ts,
		},
		"HeartbeatResponse": {"command": "jq.v1.WorkerCommand", "cancel_job_ids": "repeated string"},
		"Assignment":        {"job": "jq.v1.Job", "attempt": "int32", "deadline": ts},
		"JobLease":          {"job_id": "string", "attempt": "int32"},
		"LeaseResult":       {"job_id": "string", "ok": "bool", "error": "string"},
		"JobReport": {
			"job_id": "string", "attempt": "int32",
			"success": "oneof outcome jq.v1.JobSuccess", "failure": "oneof outcome jq.v1.JobFailure",
		},
		"JobSuccess":             {"result": "bytes", "runtime": dur},
		"JobProgressUpdate":      {"job_id": "string", "attempt": "int32", "percent": "int32", "message": "string"},
		"ReportProgressRequest":  {"worker_id": "string", "updates": "repeated jq.v1.JobProgressUpdate"},
		"ReportProgressResponse": {"results": "repeated jq.v1.LeaseResult"},
		"JobFailure":             {"error": "string", "reason": "string", "permanent": "bool", "runtime": dur},
		"ComponentHealth": {
			"name": "string", "healthy": "bool", "detail": "string", "latency": dur, "degraded": "bool",
		},
		"GetJobResultResponse": {"found": "bool", "result": "jq.v1.JobResult", "state": "jq.v1.JobState"},
	}
	for msgName, want := range tests {
		t.Run(msgName, func(t *testing.T) {
			t.Parallel()
			d, err := protoregistry.GlobalFiles.FindDescriptorByName(protoreflect.FullName("jq.v1." + msgName))
			require.NoError(t, err)
			md, ok := d.(protoreflect.MessageDescriptor)
			require.True(t, ok, "%s is a %T", msgName, d)
			for field, typ := range want {
				fd := md.Fields().ByName(protoreflect.Name(field))
				require.NotNil(t, fd, "%s.%s missing", msgName, field)
				require.Equal(t, typ, fieldType(fd), "%s.%s", msgName, field)
			}
		})
	}
}

// TestConnectRoutes serves every service's generated handler and calls it
// through the generated client, unary and streaming, over a real HTTP server.
func TestConnectRoutes(t *testing.T) {
	t.Parallel()

	mux := http.NewServeMux()
	mux.Handle(jqv1connect.NewJobServiceHandler(jqv1connect.UnimplementedJobServiceHandler{}))
	mux.Handle(jqv1connect.NewQueueServiceHandler(jqv1connect.UnimplementedQueueServiceHandler{}))
	mux.Handle(jqv1connect.NewWorkerServiceHandler(jqv1connect.UnimplementedWorkerServiceHandler{}))
	mux.Handle(jqv1connect.NewAdminServiceHandler(&versionOnly{}))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	ctx := t.Context()

	require.Equal(t, "/jq.v1.WorkerService/StreamJobs", jqv1connect.WorkerServiceStreamJobsProcedure)
	require.Equal(t, "/jq.v1.JobService/SubmitJob", jqv1connect.JobServiceSubmitJobProcedure)

	admin := jqv1connect.NewAdminServiceClient(srv.Client(), srv.URL, connect.WithGRPC())
	res, err := admin.GetVersion(ctx, connect.NewRequest(&jqv1.GetVersionRequest{}))
	require.NoError(t, err)
	require.Equal(t, "1.2.3", res.Msg.GetVersion())

	jobs := jqv1connect.NewJobServiceClient(srv.Client(), srv.URL)
	_, err = jobs.SubmitJob(ctx, connect.NewRequest(&jqv1.SubmitJobRequest{
		Job: &jqv1.JobSpec{Queue: "default", Type: "noop"},
	}))
	require.Equal(t, connect.CodeUnimplemented, connect.CodeOf(err), "SubmitJob: %v", err)

	workers := jqv1connect.NewWorkerServiceClient(srv.Client(), srv.URL)
	stream, err := workers.StreamJobs(ctx, connect.NewRequest(&jqv1.StreamJobsRequest{WorkerId: "w-1", Capacity: 4}))
	require.NoError(t, err)
	require.False(t, stream.Receive())
	require.Equal(t, connect.CodeUnimplemented, connect.CodeOf(stream.Err()), "StreamJobs: %v", stream.Err())
	require.NoError(t, stream.Close())
}

type versionOnly struct {
	jqv1connect.UnimplementedAdminServiceHandler
}

func (*versionOnly) GetVersion(
	context.Context, *connect.Request[jqv1.GetVersionRequest],
) (*connect.Response[jqv1.GetVersionResponse], error) {
	return connect.NewResponse(&jqv1.GetVersionResponse{Version: "1.2.3"}), nil
}

func fieldType(fd protoreflect.FieldDescriptor) string {
	if fd.IsMap() {
		return fmt.Sprintf("map<%s,%s>", fieldType(fd.MapKey()), fieldType(fd.MapValue()))
	}
	var typ string
	switch fd.Kind() {
	case protoreflect.MessageKind:
		typ = string(fd.Message().FullName())
	case protoreflect.EnumKind:
		typ = string(fd.Enum().FullName())
	default:
		typ = fd.Kind().String()
	}
	switch {
	case fd.IsList():
		return "repeated " + typ
	case fd.ContainingOneof() != nil && !fd.ContainingOneof().IsSynthetic():
		return "oneof " + string(fd.ContainingOneof().Name()) + " " + typ
	case fd.HasOptionalKeyword():
		return "optional " + typ
	}
	return typ
}

func findService(t *testing.T, name string) protoreflect.ServiceDescriptor {
	t.Helper()
	d, err := protoregistry.GlobalFiles.FindDescriptorByName(protoreflect.FullName(name))
	require.NoError(t, err)
	svc, ok := d.(protoreflect.ServiceDescriptor)
	if !ok {
		require.Fail(t, "not a service", "%s is a %T", name, d)
	}
	return svc
}

func goPackage(t *testing.T, fd protoreflect.FileDescriptor) string {
	t.Helper()
	opts, ok := fd.Options().(*descriptorpb.FileOptions)
	require.True(t, ok, "%s: file options are %T", fd.Path(), fd.Options())
	return opts.GetGoPackage()
}

func keys(m map[string][]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
