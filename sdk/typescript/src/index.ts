/**
 * jq's TypeScript SDK: a client and a worker for the jq job queue, over Connect (protobuf, HTTP/2 or
 * HTTP/1.1). See docs/sdks.md.
 */
export { Client, JobState, jobSpec, terminal, type CallOptions, type Result, type SubmitOptions } from "./client.js";
export { JobFailedError, JqError, PermanentError, RetryAfterError, isCode, toJqError, type ErrorCode } from "./errors.js";
export { newTransport, type ConnectionOptions } from "./transport.js";
export { JobCancelledError, Worker, defaultWorkerId, type Cause, type Handler, type JobContext, type WorkerOptions } from "./worker.js";
export { type Payload } from "./wire.js";
export type { Job, JobResult } from "./gen/jq/v1/job_pb.js";
export type { JobEvent } from "./gen/jq/v1/event_pb.js";
