import { create } from "@bufbuild/protobuf";
import { createClient, type Client as ConnectClient } from "@connectrpc/connect";

import { JobFailedError, JqError, isCode, toJqError } from "./errors.js";
import type { Job, JobSpec, JobResult } from "./gen/jq/v1/job_pb.js";
import { JobSpecSchema, JobState } from "./gen/jq/v1/job_pb.js";
import type { JobEvent as _JobEvent } from "./gen/jq/v1/event_pb.js";
import { JobService } from "./gen/jq/v1/job_service_pb.js";
import { QueueService, type Queue } from "./gen/jq/v1/queue_service_pb.js";
import { WorkerService } from "./gen/jq/v1/worker_service_pb.js";
import { newTransport, type ConnectionOptions } from "./transport.js";
import { durationFromMs, sleep, timestampFromDate, toBytes, type Payload } from "./wire.js";

export type { Job, JobResult };
export { JobState };

/** Options of one job (durations in ms). */
export interface SubmitOptions {
  priority?: number;
  maxRetries?: number;
  timeoutMs?: number;
  ttlMs?: number;
  runAt?: Date;
  idempotencyKey?: string;
  labels?: Record<string, string>;
  keepResult?: boolean;
}

/** jobSpec builds a JobSpec: the payload as bytes, a string as its UTF-8, a JSON value as its text. */
export function jobSpec(queue: string, type: string, payload?: Payload, o: SubmitOptions = {}): JobSpec {
  return create(JobSpecSchema, {
    queue, type, payload: toBytes(payload), priority: o.priority ?? 0, maxRetries: o.maxRetries,
    timeout: o.timeoutMs !== undefined ? durationFromMs(o.timeoutMs) : undefined,
    ttl: o.ttlMs !== undefined ? durationFromMs(o.ttlMs) : undefined,
    runAt: o.runAt ? timestampFromDate(o.runAt) : undefined,
    idempotencyKey: o.idempotencyKey ?? "", labels: o.labels ?? {}, keepResult: o.keepResult ?? false,
  });
}

/** A job's result (GetJobResult): `found` false while unfinished or when no bytes were kept. */
export interface Result {
  found: boolean;
  state: JobState;
  success: boolean;
  data: Uint8Array;
  reason: string;
  message: string;
  shouldRetry: boolean;
}

export const terminal = (s: JobState) => s === JobState.DONE || s === JobState.DEAD_LETTERED;

/** Per-call options: an AbortSignal cancels the call; timeoutMs bounds it. */
export interface CallOptions {
  signal?: AbortSignal;
  timeoutMs?: number;
}

/**
 * A client of one jq server. Every method rejects with a JqError carrying the server's code and message.
 *
 *     const c = new Client({ addr: "localhost:50051", token: process.env.JQ_TOKEN });
 *     const id = await c.submit("default", "resize", { url }, { keepResult: true });
 *     const bytes = await c.waitResult(id, { timeoutMs: 30_000 });
 */
export class Client {
  readonly jobs: ConnectClient<typeof JobService>;
  readonly queues: ConnectClient<typeof QueueService>;
  readonly workers: ConnectClient<typeof WorkerService>;

  constructor(o: ConnectionOptions = {}) {
    const t = newTransport(o);
    this.jobs = createClient(JobService, t);
    this.queues = createClient(QueueService, t);
    this.workers = createClient(WorkerService, t);
  }

  private async call<T>(f: () => Promise<T>): Promise<T> {
    try {
      return await f();
    } catch (e) {
      throw toJqError(e);
    }
  }

  /** submit one job; resolves to its id (the earlier job's when its idempotency key matched). */
  submit(queue: string, type: string, payload?: Payload, o: SubmitOptions = {}, c?: CallOptions): Promise<string> {
    return this.call(async () => (await this.jobs.submitJob({ job: jobSpec(queue, type, payload, o) }, c)).jobId);
  }

  /** submitMany submits 1 to 1000 jobs atomically. */
  submitMany(specs: JobSpec[], c?: CallOptions): Promise<{ jobId: string; existing: boolean }[]> {
    return this.call(async () =>
      (await this.jobs.submitJobs({ jobs: specs }, c)).results.map((r) => ({ jobId: r.jobId, existing: r.existing })));
  }

  get(jobId: string, c?: CallOptions): Promise<Job> {
    return this.call(async () => (await this.jobs.getJob({ jobId }, c)).job!);
  }

  /** events lists the job's recorded state transitions, oldest first. */
  events(jobId: string, c?: CallOptions): Promise<_JobEvent[]> {
    return this.call(async () => (await this.jobs.listJobEvents({ jobId }, c)).events);
  }

  /** cancel: a PENDING/ASSIGNED job is dead-lettered at once; a RUNNING one's worker is asked (cancelRequested). */
  cancel(jobId: string, c?: CallOptions): Promise<{ job: Job; cancelRequested: boolean }> {
    return this.call(async () => {
      const r = await this.jobs.cancelJob({ jobId }, c);
      return { job: r.job!, cancelRequested: r.cancelRequested };
    });
  }

  retry(jobId: string, c?: CallOptions): Promise<Job> {
    return this.call(async () => (await this.jobs.retryJob({ jobId }, c)).job!);
  }

  result(jobId: string, o: { consume?: boolean } & CallOptions = {}): Promise<Result> {
    return this.call(async () => {
      const r = await this.jobs.getJobResult({ jobId, consume: o.consume ?? false }, o);
      const x = r.result;
      return {
        found: r.found, state: r.state, success: x?.type === "success", data: x?.data ?? new Uint8Array(0),
        reason: x?.reason ?? "", message: x?.message ?? "", shouldRetry: x?.shouldRetry ?? false,
      };
    });
  }

  /** watch yields the job now and after each change, until it is DONE or DEAD_LETTERED; abort with the signal. */
  async *watch(jobId: string, o: { signal?: AbortSignal } = {}): AsyncGenerator<Job> {
    try {
      for await (const m of this.jobs.watchJob({ jobId }, { signal: o.signal, timeoutMs: 0 })) {
        if (m.job) yield m.job;
      }
    } catch (e) {
      throw toJqError(e);
    }
  }

  /** wait resolves to the job once DONE or DEAD_LETTERED; reconnects when a replica goes away. */
  async wait(jobId: string, o: CallOptions = {}): Promise<Job> {
    const signals = [o.signal, o.timeoutMs !== undefined ? AbortSignal.timeout(o.timeoutMs) : undefined].filter(
      (s): s is AbortSignal => s !== undefined);
    const signal = signals.length ? AbortSignal.any(signals) : undefined;
    for (;;) {
      try {
        let last: Job | undefined;
        for await (const j of this.watch(jobId, { signal })) last = j;
        if (last && terminal(last.state)) return last;
      } catch (e) {
        if (signal?.aborted) {
          if (o.signal?.aborted) throw toJqError(e);
          throw new JqError("deadline_exceeded", `job ${jobId} not finished within ${o.timeoutMs} ms`);
        }
        if (!isCode(e, "unavailable")) throw e;
        await sleep(200, signal);
      }
    }
  }

  /** waitResult waits for the job and resolves to its result bytes (submit with keepResult); rejects with JobFailedError. */
  async waitResult(jobId: string, o: CallOptions = {}): Promise<Uint8Array> {
    const job = await this.wait(jobId, o);
    if (job.state !== JobState.DONE) {
      throw new JobFailedError(jobId, JobState[job.state], job.failureReason, job.lastError);
    }
    return (await this.result(jobId)).data;
  }

  /** createQueue creates a queue (admin); durations in ms. */
  createQueue(name: string, o: { maxRetries?: number; backoffBaseMs?: number; backoffMaxMs?: number } = {}): Promise<Queue> {
    return this.call(async () => (await this.queues.createQueue({
      name, maxRetries: o.maxRetries,
      backoffBase: o.backoffBaseMs !== undefined ? durationFromMs(o.backoffBaseMs) : undefined,
      backoffMax: o.backoffMaxMs !== undefined ? durationFromMs(o.backoffMaxMs) : undefined,
    })).queue!);
  }
}
