// Package api is the home of jq's public contract: the protobuf definitions
// under proto/jq/v1 and the Go code generated from them under gen.
//
// # Contract
//
// Package jq.v1 defines six services, served by connect-go on one port as
// gRPC, gRPC-Web and Connect at once, in protobuf, JSON and MessagePack
// (package codec; OpenAPI holds the OpenAPI 3.1 document of the unary RPCs):
//
//   - JobService: submit (single and atomic batch), get, list with filters
//     and page tokens, cancel, retry, list events, fetch result.
//   - QueueService: create, update, delete, list, get, stats, pause, resume.
//   - WorkerService: the worker protocol (register, heartbeat, a server
//     stream of assignments, ack, report, deregister) and the operator calls
//     list, drain and shutdown.
//   - AdminService: status, version, and the stats, peek and purge-dlq
//     commands.
//   - ScheduleService: periodic jobs (create, update, list, get, pause,
//     resume, trigger, delete).
//   - ConstraintService: flow control, named limits on the jobs a matcher
//     selects (create or replace, list, get with usage, delete).
//
// JobEvent (event.proto) is both the item of a job's event log and the
// protobuf message published to Kafka for every state transition.
//
// The .proto files are the documentation: every message, field, enum value,
// service and RPC carries a comment giving its meaning, units, default,
// validation rule and, for RPCs, the gRPC status codes returned. buf lint
// enforces that (rule categories STANDARD and COMMENTS in buf.yaml).
//
// Two properties of the worker protocol matter to every implementation:
// each assignment carries an attempt number that fences acks, heartbeats and
// reports (a stale attempt is rejected), and delivery is at least once, so
// handlers must be idempotent.
//
// # Go packages
//
//	github.com/jq-dev/jq/api/gen/jq/v1             (jqv1)        messages and enums
//	github.com/jq-dev/jq/api/gen/jq/v1/jqv1connect (jqv1connect) clients and handlers
//	api/gen/openapi/jq.openapi.yaml                              OpenAPI 3.1 (embedded as OpenAPI)
//
// # Regenerating
//
// The generated code is checked in and never edited by hand. From the
// module root, with everything pinned and offline (local plugins run through
// go tool; buf lives in the separate tools module):
//
//	go tool -modfile=tools/go.mod buf format -w
//	go tool -modfile=tools/go.mod buf lint
//	go tool -modfile=tools/go.mod buf breaking --against '.git#branch=main'
//	go tool -modfile=tools/go.mod buf generate
//
// buf generate cleans api/gen first, so its output is exactly the current
// contract.
package api
