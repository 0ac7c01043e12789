import { hostname } from "node:os";
import { randomBytes } from "node:crypto";

import { create } from "@bufbuild/protobuf";
import { createClient, type Client as ConnectClient } from "@connectrpc/connect";

import { JqError, PermanentError, RetryAfterError, isCode, toJqError } from "./errors.js";
import type { Job } from "./gen/jq/v1/job_pb.js";
import {
  JobReportSchema, WorkerCommand, WorkerService, type Assignment, type JobReport, type JobLease, type LeaseResult,
} from "./gen/jq/v1/worker_service_pb.js";
import { newTransport, type ConnectionOptions } from "./transport.js";
import { backoff, durationFromMs, durationMs, sleep, text, timestampMs, toBytes, type Payload } from "./wire.js";

/** Why a job's signal was aborted (JobContext.cause). */
export type Cause =
  | "cancelled" // CancelJob, or a lease the server no longer honours: reported "cancelled"
  | "timeout" // the job's timeout: reported "timeout", retryable
  | "lease_lost" // ack refused, newer attempt, worker declared offline: not reported
  | "lease_expired" // self-fenced: the lease could not be renewed in time; reported retryable
  | "shutdown"; // the stop's grace period ended: not reported, left to the server's reaper

/** The abort reason of a job's signal. */
export class JobCancelledError extends Error {
  constructor(readonly cause: Cause) {
    super(`job cancelled: ${cause}`);
    this.name = "JobCancelledError";
  }
}

/** What a handler receives. */
export interface JobContext {
  readonly job: Job;
  readonly attempt: number;
  readonly payload: Uint8Array;
  /** Aborted (with a JobCancelledError) on CancelJob, the job's timeout, a lost lease, self-fencing or shutdown. */
  readonly signal: AbortSignal;
  /** The payload parsed as JSON. */
  json<T = unknown>(): T;
  /** Record how far the attempt got (0..100); sent at most once a second per job, the latest value first. */
  progress(percent: number, message?: string): void;
  /** Milliseconds left before the job's timeout. */
  remainingMs(): number;
}

/** A handler returns the result (bytes, a string, a JSON value, or nothing) or throws to fail the attempt. */
export type Handler = (ctx: JobContext) => Payload | Promise<Payload>;

export interface WorkerOptions extends ConnectionOptions {
  queues: string[];
  /** Handlers by job type; the worker registers these types and gets no job of another. */
  handlers: Record<string, Handler>;
  concurrency?: number; // default 4, 1..1024
  prefetch?: number; // assignments buffered beyond concurrency, 0..concurrency (default 0)
  workerId?: string; // default <hostname>-<pid>-<random>
  labels?: Record<string, string>;
  version?: string;
  shutdownGraceMs?: number; // default 60 s
  flushTimeoutMs?: number; // default 5 s
  reportTimeoutMs?: number; // default 5 min
  ackDelayMs?: number; // default 1 s
  minBackoffMs?: number; // default 100 ms
  maxBackoffMs?: number; // default 2 s
  maxResultBytes?: number; // default 256 KiB
  /** Called after each handler returns. */
  onJobDone?: (d: { job: Job; attempt: number; outcome: "succeeded" | "failed" | "abandoned"; reason: string; error?: unknown }) => void;
}

const FENCE_FRACTION = 0.75;
const DEFAULT_JOB_TIMEOUT_MS = 30_000;
const MAX_BATCH = 1000;
const MAX_ERROR_BYTES = 4 << 10;

enum S { Queued, Running, Reporting, Done }

interface Task {
  job: Job;
  jobId: string;
  attempt: number;
  state: S;
  abandoned: boolean;
  ackQueued: boolean;
  ackBy: number; // performance.now() ms
  fenced: boolean;
  // Made when the handler first reads ctx.signal: an AbortController per job was a tenth of a no-op
  // job's CPU, and most handlers never look.
  ctrl?: AbortController;
  cause?: Cause;
  startedAt: number; // performance.now() ms; 0 before the start
  timeoutMs: number;
  progress?: [number, string];
  progressNext: number;
  redelivered: boolean;
  timer?: NodeJS.Timeout;
}

const now = () => performance.now();

/** defaultWorkerId is <hostname>-<pid>-<8 random hex digits>: unguessable, so no other principal can take it first. */
export function defaultWorkerId(): string {
  return `${hostname() || "worker"}-${process.pid}-${randomBytes(4).toString("hex")}`;
}

/** A wake-up: wait(ms) resolves after ms or at the next kick(). */
class Wake {
  private waiters: (() => void)[] = [];
  kick(): void {
    const w = this.waiters;
    this.waiters = [];
    for (const f of w) f();
  }
  wait(ms: number): Promise<void> {
    return new Promise((resolve) => {
      let t: NodeJS.Timeout | undefined = undefined;
      const done = () => {
        clearTimeout(t);
        resolve();
      };
      t = setTimeout(done, Math.max(ms, 0));
      this.waiters.push(done);
    });
  }
}

/**
 * One sender for one kind of call (acks, reports). While a call is in flight new items accumulate;
 * the next call takes all of them (up to 1000). A lone item is sent at once. A failed call is retried
 * with backoff, merged with newer items, until each item's deadline.
 */
class Batcher<T> {
  private items: { item: T; deadline: number }[] = [];
  private busy = false;
  private stopped = false;
  private wake = new Wake();
  private idle = new Wake();
  calls = 0;
  constructor(
    private send: (items: T[]) => Promise<LeaseResult[]>,
    private done: (item: T, res: LeaseResult | undefined, err: unknown) => void,
    private lo: number, private hi: number,
  ) {}
  start(): Promise<void> {
    return this.run();
  }
  add(item: T, deadline: number): void {
    this.items.push({ item, deadline });
    this.wake.kick();
  }
  stop(): void {
    this.stopped = true;
    this.wake.kick();
  }
  async flush(timeoutMs: number): Promise<boolean> {
    const end = now() + timeoutMs;
    while (this.items.length || this.busy) {
      if (now() >= end) return false;
      await this.idle.wait(end - now());
    }
    return true;
  }
  private async run(): Promise<void> {
    let failures = 0;
    while (!this.stopped) {
      if (!this.items.length) {
        await this.wake.wait(60_000);
        continue;
      }
      const batch = this.items.splice(0, MAX_BATCH);
      this.busy = true;
      let retry: { item: T; deadline: number }[] = [];
      try {
        this.calls++;
        const res = await this.send(batch.map((b) => b.item));
        failures = 0;
        batch.forEach((b, i) => this.done(b.item, res[i], undefined));
      } catch (e) {
        if (isCode(e, "invalid_argument", "unauthenticated", "permission_denied")) {
          for (const b of batch) this.done(b.item, undefined, e);
        } else {
          failures++;
          const t = now();
          for (const b of batch) {
            if (t >= b.deadline) this.done(b.item, undefined, e);
            else retry.push(b);
          }
        }
      }
      this.items = retry.concat(this.items);
      if (retry.length && !this.stopped) await this.wake.wait(backoff(failures, this.lo, this.hi));
      this.busy = false;
      this.idle.kick();
    }
  }
}

/**
 * The worker runtime: WorkerService spoken as the Go executor speaks it (docs/sdks.md). Handlers are
 * async functions; a slow synchronous one holds up the event loop, heartbeats included.
 */
export class Worker {
  readonly workerId: string;
  readonly stats: Record<string, number> = {};
  private api: ConnectClient<typeof WorkerService>;
  private o: Required<Omit<WorkerOptions, keyof ConnectionOptions | "onJobDone" | "labels" | "workerId">> & WorkerOptions;
  private tasks = new Map<string, Task>();
  private queued: Task[] = [];
  private running = 0;
  private active = 0; // queued or running
  private changed = new Wake(); // a lease was released or a job finished
  private hbInterval = 5000;
  private hbTimeout = 0;
  private renewedAt = 0;
  private registered = false;
  private everRegistered = false;
  private draining = false;
  private stopping = false;
  private stopRequested = false;
  private stopWake = new Wake();
  private hbWake = new Wake();
  private hbDone = false;
  private hbNow = false;
  private streamCtrl?: AbortController;
  private acks: Batcher<Task>;
  private reports: Batcher<[Task, JobReport]>;
  private progressDue = new Map<string, Task>();
  private progressWake = new Wake();
  fatal?: JqError;

  constructor(o: WorkerOptions) {
    if (!o.queues?.length) throw new Error("at least one queue is required");
    if (!o.handlers || !Object.keys(o.handlers).length) throw new Error("at least one handler is required");
    const concurrency = o.concurrency ?? 4;
    if (concurrency < 1 || concurrency > 1024) throw new Error(`concurrency must be 1 to 1024, got ${concurrency}`);
    this.o = {
      ...o, concurrency, prefetch: Math.min(Math.max(o.prefetch ?? 0, 0), concurrency), version: o.version ?? "",
      shutdownGraceMs: o.shutdownGraceMs ?? 60_000, flushTimeoutMs: o.flushTimeoutMs ?? 5000,
      reportTimeoutMs: o.reportTimeoutMs ?? 300_000, ackDelayMs: o.ackDelayMs ?? 1000,
      minBackoffMs: o.minBackoffMs ?? 100, maxBackoffMs: Math.max(o.maxBackoffMs ?? 2000, o.minBackoffMs ?? 100),
      maxResultBytes: o.maxResultBytes ?? 256 << 10,
    };
    this.workerId = o.workerId ?? defaultWorkerId();
    this.api = createClient(WorkerService, newTransport(o));
    this.acks = new Batcher((ts) => this.sendAcks(ts), (t, r, e) => this.ackDone(t, r, e), this.o.minBackoffMs, this.o.maxBackoffMs);
    this.reports = new Batcher((rs) => this.sendReports(rs), (r, res, e) => this.reportDone(r, res, e), this.o.minBackoffMs, this.o.maxBackoffMs);
  }

  private count(k: string, n = 1): void {
    this.stats[k] = (this.stats[k] ?? 0) + n;
  }

  /** stop starts the two-phase stop: no new work, then running jobs get the grace period. */
  stop(): void {
    this.stopRequested = true;
    this.stopWake.kick();
  }

  /** held is the number of leases held now (received, not yet reported). */
  held(): number {
    return this.tasks.size;
  }

  /**
   * run registers (retrying until the server answers), runs jobs until stop() or the operator's SHUTDOWN,
   * then stops in two phases and deregisters. Rejects only when the server refuses the registration.
   */
  async run(): Promise<void> {
    // Started here, not in the constructor: an idle sender's wait would keep the process of a worker
    // that was made but never run alive.
    const loops = [this.acks.start(), this.reports.start(), this.sessionLoop(), this.heartbeatLoop(), this.progressLoop()];
    while (!this.stopRequested) await this.stopWake.wait(60_000);
    await this.shutdown();
    this.acks.stop();
    this.reports.stop();
    this.progressWake.kick();
    await Promise.allSettled(loops);
    if (this.fatal) throw this.fatal;
  }

  /** runUntilSignal is run() with SIGTERM and SIGINT starting the stop, for a worker program. */
  async runUntilSignal(): Promise<void> {
    const onSignal = () => this.stop();
    process.on("SIGTERM", onSignal);
    process.on("SIGINT", onSignal);
    try {
      await this.run();
    } finally {
      process.off("SIGTERM", onSignal);
      process.off("SIGINT", onSignal);
    }
  }

  // --- session ---------------------------------------------------------------------------------

  private async register(): Promise<void> {
    const sent = now();
    const r = await this.api.registerWorker({
      workerId: this.workerId, hostname: hostname(), concurrency: this.o.concurrency, queues: this.o.queues,
      version: this.o.version, labels: this.o.labels ?? {}, types: Object.keys(this.o.handlers).sort(),
    });
    this.hbInterval = durationMs(r.heartbeatInterval) || this.hbInterval;
    this.hbTimeout = durationMs(r.heartbeatTimeout) || this.hbTimeout;
    this.renewedAt = Math.max(this.renewedAt, sent);
    this.registered = this.everRegistered = true;
    this.heartbeatNow();
  }

  private capBackoff(d: number): number {
    return this.hbTimeout ? Math.min(d, Math.max(this.hbTimeout / 4, 100)) : d;
  }

  private async sessionLoop(): Promise<void> {
    let failures = 0;
    while (!this.stopping) {
      if (this.draining) return;
      if (!this.registered) {
        try {
          await this.register();
          failures = 0;
        } catch (e) {
          if (isCode(e, "invalid_argument", "unauthenticated", "permission_denied")) {
            this.fatal = toJqError(e);
            this.stop();
            return;
          }
          failures++;
          await this.stopWake.wait(this.capBackoff(backoff(failures, this.o.minBackoffMs, this.o.maxBackoffMs)));
          continue;
        }
      }
      const err = await this.consume();
      if (this.stopping) return;
      if (err === undefined || isCode(err, "failed_precondition")) this.heartbeatNow();
      else if (!isCode(err, "canceled")) this.registered = false; // restart, cut, ABORTED: register again
      if (isCode(err, "canceled")) continue; // closed by the worker itself
      failures++;
      await this.stopWake.wait(this.capBackoff(backoff(failures, this.o.minBackoffMs, this.o.maxBackoffMs)));
    }
  }

  private async consume(): Promise<unknown> {
    let free = 0;
    while (!this.stopping) {
      free = this.o.concurrency + this.o.prefetch - this.tasks.size;
      if (free > 0) break;
      await this.changed.wait(500);
    }
    if (this.stopping) return new JqError("canceled", "stopping");
    const ctrl = new AbortController();
    this.streamCtrl = ctrl;
    try {
      for await (const m of this.api.streamJobs(
        { workerId: this.workerId, capacity: free, prefetch: this.o.prefetch }, { signal: ctrl.signal, timeoutMs: 0 })) {
        if (m.assignment) this.accept(m.assignment);
      }
      return undefined;
    } catch (e) {
      return ctrl.signal.aborted ? new JqError("canceled", "stream closed by the worker") : toJqError(e);
    } finally {
      if (this.streamCtrl === ctrl) this.streamCtrl = undefined;
    }
  }

  private resetStream(): void {
    this.streamCtrl?.abort();
  }

  private reregister(): void {
    this.registered = false;
    this.resetStream();
  }

  // --- assignments and handlers ------------------------------------------------------------------

  private accept(a: Assignment): void {
    this.count("received");
    const job = a.job;
    if (!job?.id) return;
    job.attempt = a.attempt;
    const tms = durationMs(job.timeout);
    // The deadline is on the server's clock: a deadline that looks past bounds the ack's retries only.
    const left = a.deadline ? timestampMs(a.deadline) - Date.now() : 0;
    const t: Task = {
      job, jobId: job.id, attempt: a.attempt, state: S.Queued, abandoned: false, ackQueued: false,
      ackBy: now() + (left > 1000 ? left : 5000), fenced: false, startedAt: 0,
      timeoutMs: tms > 0 ? tms : DEFAULT_JOB_TIMEOUT_MS, progressNext: 0, redelivered: false,
    };
    const old = this.tasks.get(job.id);
    if (old) {
      if (old.attempt === t.attempt) return; // a duplicate assignment
      this.abandon(old, "lease_lost"); // the server moved the job to a newer attempt
    }
    this.tasks.set(job.id, t);
    if (this.running < this.o.concurrency) {
      this.active++;
      this.start(t);
    } else if (this.queued.length < this.o.prefetch) {
      this.active++;
      this.queued.push(t);
      setTimeout(() => this.lazyAck(t), Math.max((t.ackBy - now()) / 2, 0)).unref();
    } else {
      t.state = S.Reporting; // beyond concurrency and prefetch: a protocol error, reported, never run
      this.count("protocol_errors");
      this.queueReport(t, { case: "failure", error: `worker ${this.workerId} received an assignment beyond its concurrency of ${this.o.concurrency}`, reason: "error", permanent: false });
    }
  }

  private start(t: Task): void {
    t.state = S.Running;
    this.running++;
    if (!t.ackQueued) {
      const delay = Math.min(Math.max(this.o.ackDelayMs, 0), Math.max(t.ackBy - now(), 0) / 2);
      setTimeout(() => this.lazyAck(t), delay).unref();
    }
    void this.execute(t);
  }

  private cancel(t: Task, cause: Cause): void {
    if (!t.cause) t.cause = cause;
    if (t.ctrl && !t.ctrl.signal.aborted) t.ctrl.abort(new JobCancelledError(t.cause));
  }

  private signalOf(t: Task): AbortSignal {
    if (!t.ctrl) {
      t.ctrl = new AbortController();
      if (t.cause) t.ctrl.abort(new JobCancelledError(t.cause));
    }
    return t.ctrl.signal;
  }

  private async execute(t: Task): Promise<void> {
    this.count("started");
    t.startedAt = now();
    t.timer = setTimeout(() => this.cancel(t, "timeout"), t.timeoutMs);
    const handler = this.o.handlers[t.job.type];
    const signalOf = () => this.signalOf(t);
    const ctx: JobContext = {
      job: t.job, attempt: t.attempt, payload: t.job.payload,
      get signal() {
        return signalOf();
      },
      json: <T>() => JSON.parse(text(t.job.payload)) as T,
      progress: (p: number, m = "") => this.progress(t, Math.round(Math.min(Math.max(p, 0), 100)), m.slice(0, 256)),
      remainingMs: () => Math.max(t.startedAt + t.timeoutMs - now(), 0),
    };
    let res: Payload, err: unknown, threw = false;
    try {
      if (!handler) throw new PermanentError(`no handler for job type ${JSON.stringify(t.job.type)}`);
      if (t.cause) throw new JobCancelledError(t.cause);
      res = await handler(ctx);
    } catch (e) {
      err = e;
      threw = true;
    }
    clearTimeout(t.timer);
    const runtime = now() - t.startedAt;
    let [outcome, out] = this.outcome(t, res, threw, err, runtime);
    this.running--;
    const report = !t.abandoned && outcome !== "abandoned";
    if (!report) {
      outcome = "abandoned";
      this.release(t);
    } else {
      t.state = S.Reporting;
      this.active--;
      this.startQueued();
      this.changed.kick();
    }
    this.count(outcome);
    if (report) this.queueReport(t, out!);
    this.o.onJobDone?.({ job: t.job, attempt: t.attempt, outcome, reason: out?.case === "failure" ? out.reason : "", error: err });
  }

  private outcome(t: Task, res: Payload, threw: boolean, err: unknown, runtime: number): ["succeeded" | "failed" | "abandoned", Outcome | undefined] {
    const fail = (reason: string, msg: string, permanent = false, retryAfterMs = 0): ["failed", Outcome] =>
      ["failed", { case: "failure", reason, error: truncate(msg), permanent, retryAfterMs: permanent ? 0 : retryAfterMs, runtime }];
    const cause = t.cause;
    if (cause === "lease_lost" || (threw && cause === "shutdown")) return ["abandoned", undefined];
    if (!threw) {
      const data = toBytes(res);
      if (data.length > this.o.maxResultBytes) {
        return fail("output_too_large", `result of ${data.length} bytes exceeds the limit of ${this.o.maxResultBytes} bytes`, true);
      }
      return ["succeeded", { case: "success", result: data, runtime }];
    }
    const msg = err instanceof Error ? `${err.message}` : String(err);
    if (cause === "cancelled") return fail("cancelled", `cancelled: ${msg}`, true);
    if (cause === "lease_expired") {
      if (this.stopping) return ["abandoned", undefined];
      return fail("lease_expired", "lease not renewed in time: the worker stopped the job before the server could hand it to another worker");
    }
    if (cause === "timeout") return fail("timeout", `job exceeded its timeout of ${t.timeoutMs} ms: ${msg}`);
    if (err instanceof PermanentError) return fail("error", msg, true);
    if (err instanceof RetryAfterError) return fail("error", msg, false, err.seconds * 1000);
    return fail("error", err instanceof Error ? `${err.name}: ${msg}` : msg);
  }

  private startQueued(): void {
    while (this.queued.length && this.running < this.o.concurrency) {
      const t = this.queued.shift()!;
      if (t.state === S.Queued) this.start(t);
    }
  }

  private release(t: Task): void {
    if (t.state === S.Done) return;
    if (t.state === S.Running) {
      this.active--;
      this.startQueued();
    } else if (t.state === S.Queued) {
      this.active--;
      const i = this.queued.indexOf(t);
      if (i >= 0) this.queued.splice(i, 1);
    }
    t.state = S.Done;
    if (this.tasks.get(t.jobId) === t) this.tasks.delete(t.jobId);
    this.changed.kick();
  }

  private abandon(t: Task, cause: Cause): void {
    t.abandoned = true;
    if (t.state === S.Queued) {
      this.release(t);
      this.count("abandoned");
    } else if (t.state === S.Running) {
      this.cancel(t, cause);
    }
    if (this.tasks.get(t.jobId) === t) {
      this.tasks.delete(t.jobId);
      this.changed.kick();
    }
  }

  // --- acks and reports ----------------------------------------------------------------------------

  private lazyAck(t: Task): void {
    if ((t.state !== S.Running && t.state !== S.Queued) || t.ackQueued || t.abandoned) return;
    t.ackQueued = true;
    this.acks.add(t, t.ackBy);
  }

  private lease(t: Task): JobLease {
    return {
      $typeName: "jq.v1.JobLease", jobId: t.jobId, attempt: t.attempt,
      startedAgo: t.startedAt ? durationFromMs(Math.max(now() - t.startedAt, 0)) : undefined,
    };
  }

  private async sendAcks(ts: Task[]): Promise<LeaseResult[]> {
    try {
      return (await this.api.ackJobs({ workerId: this.workerId, leases: ts.map((t) => this.lease(t)) })).results;
    } catch (e) {
      this.noteCallError(e);
      throw e;
    }
  }

  private ackDone(t: Task, r: LeaseResult | undefined, err: unknown): void {
    if ((t.state !== S.Running && t.state !== S.Queued) || (!err && r?.ok)) return;
    this.count("acks_rejected");
    this.abandon(t, "lease_lost");
  }

  private queueReport(t: Task, o: Outcome): void {
    const rep = create(JobReportSchema, {
      jobId: t.jobId, attempt: t.attempt,
      outcome: o.case === "success"
        ? { case: "success", value: { result: o.result, runtime: durationFromMs(o.runtime ?? 0) } }
        : {
          case: "failure", value: {
            error: o.error, reason: o.reason, permanent: o.permanent, runtime: durationFromMs(o.runtime ?? 0),
            retryAfter: o.retryAfterMs ? durationFromMs(o.retryAfterMs) : undefined,
          },
        },
    });
    this.reports.add([t, rep], now() + this.o.reportTimeoutMs);
  }

  private async sendReports(items: [Task, JobReport][]): Promise<LeaseResult[]> {
    const reports = items.map(([t, r]) => ({ ...r, startedAgo: t.startedAt ? durationFromMs(Math.max(now() - t.startedAt, 0)) : undefined }));
    try {
      return (await this.api.reportJobs({ workerId: this.workerId, reports })).results;
    } catch (e) {
      this.noteCallError(e);
      for (const [t] of items) t.redelivered = true;
      throw e;
    }
  }

  private reportDone([t]: [Task, JobReport], r: LeaseResult | undefined, err: unknown): void {
    this.release(t);
    if (err) this.count("reports_lost");
    else if (!r?.ok) this.count(t.redelivered ? "reports_settled" : "reports_rejected");
  }

  private noteCallError(e: unknown): void {
    if (isCode(e, "not_found")) this.reregister();
    else if (isCode(e, "failed_precondition")) this.heartbeatNow();
  }

  // --- heartbeats, commands, self-fencing ----------------------------------------------------------

  private heartbeatNow(): void {
    this.hbNow = true;
    this.hbWake.kick();
  }

  private async heartbeatLoop(): Promise<void> {
    let next = now();
    let unreachable = 0;
    while (!this.hbDone) {
      const wait = Math.min(next - now(), this.checkFence(now()));
      if (wait > 0 && !this.hbNow) await this.hbWake.wait(wait);
      if (this.hbDone) return;
      if (now() >= next || this.hbNow) {
        this.hbNow = false;
        if (this.registered) unreachable = await this.heartbeat(unreachable);
        next = now() + this.hbInterval;
      }
    }
  }

  private async heartbeat(unreachable: number): Promise<number> {
    const held = new Map<string, number>();
    for (const t of this.tasks.values()) held.set(t.jobId, t.attempt);
    const sent = now();
    let reply;
    try {
      reply = await this.api.heartbeat(
        { workerId: this.workerId, running: [...held].map(([jobId, attempt]) => ({ jobId, attempt })) },
        { timeoutMs: Math.max(Math.min(this.hbInterval, 10_000), 1000) });
    } catch (e) {
      if (isCode(e, "failed_precondition")) {
        // Declared offline: the server failed our jobs already.
        for (const t of [...this.tasks.values()]) if (t.state === S.Running || t.state === S.Queued) this.abandon(t, "lease_lost");
        this.reregister();
        return 0;
      }
      if (isCode(e, "not_found")) {
        this.reregister();
        return 0;
      }
      unreachable++;
      if (isCode(e, "unavailable", "deadline_exceeded") && unreachable >= 2) this.resetStream();
      return unreachable;
    }
    this.renewedAt = Math.max(this.renewedAt, sent);
    for (const id of reply.cancelJobIds) {
      const t = this.tasks.get(id);
      if (!t || held.get(id) !== t.attempt) continue;
      if (t.state === S.Running || t.state === S.Queued) this.cancel(t, "cancelled");
    }
    if ((reply.command === WorkerCommand.DRAIN || reply.command === WorkerCommand.SHUTDOWN) && !this.draining) {
      this.draining = true;
      this.resetStream();
    }
    if (reply.command === WorkerCommand.SHUTDOWN) this.stop();
    return 0;
  }

  /** checkFence cancels every held job once the lease went unrenewed past 3/4 of the heartbeat timeout. */
  private checkFence(t: number): number {
    if (!this.hbTimeout || !this.renewedAt) return 1000;
    const after = this.hbTimeout * FENCE_FRACTION;
    const since = t - this.renewedAt;
    if (since < after) return after - since;
    let n = 0;
    for (const task of this.tasks.values()) {
      if (task.fenced || (task.state !== S.Running && task.state !== S.Queued)) continue;
      task.fenced = true;
      this.cancel(task, "lease_expired");
      n++;
    }
    this.count("fenced", n);
    return Math.min(Math.max(this.hbInterval, 100), 1000);
  }

  // --- progress ------------------------------------------------------------------------------------

  private progress(t: Task, percent: number, message: string): void {
    if (this.tasks.get(t.jobId) !== t) return;
    t.progress = [percent, message];
    this.progressDue.set(t.jobId, t);
    this.progressWake.kick();
  }

  private async progressLoop(): Promise<void> {
    while (!this.stopping || this.progressDue.size) {
      const t0 = now();
      const due = [...this.progressDue.values()].filter((t) => t.progressNext <= t0);
      if (!due.length) {
        if (this.stopping) return;
        const next = Math.min(...[...this.progressDue.values()].map((t) => t.progressNext), t0 + 1000);
        await this.progressWake.wait(Math.max(next - t0, 10));
        continue;
      }
      for (const t of due) this.progressDue.delete(t.jobId);
      const updates = due.filter((t) => t.state === S.Running && !t.abandoned && this.tasks.get(t.jobId) === t && t.progress)
        .map((t) => {
          t.progressNext = t0 + 1000;
          return { jobId: t.jobId, attempt: t.attempt, percent: t.progress![0], message: t.progress![1] };
        });
      if (!updates.length) continue;
      try {
        await this.api.reportProgress({ workerId: this.workerId, updates });
        this.count("progress_sent", updates.length);
      } catch {
        // best effort: a newer value goes with the next update
      }
    }
  }

  // --- stop ----------------------------------------------------------------------------------------

  private async waitIdle(ms: number): Promise<boolean> {
    const end = now() + ms;
    while (this.active > 0 && now() < end) await this.changed.wait(end - now());
    return this.active === 0;
  }

  private async shutdown(): Promise<void> {
    this.stopping = true;
    this.resetStream();
    if (!(await this.waitIdle(this.o.shutdownGraceMs))) {
      for (const t of [...this.tasks.values()]) {
        if (t.state === S.Running) this.cancel(t, "shutdown");
        else if (t.state === S.Queued) this.abandon(t, "shutdown");
      }
      await this.waitIdle(this.o.flushTimeoutMs);
    }
    await this.reports.flush(this.o.flushTimeoutMs);
    this.hbDone = true;
    this.hbWake.kick();
    if (!this.everRegistered) return;
    try {
      await this.api.deregisterWorker({ workerId: this.workerId }, { timeoutMs: this.o.flushTimeoutMs });
    } catch {
      // the server notices the missing heartbeats
    }
  }
}

type Outcome =
  | { case: "success"; result: Uint8Array; runtime?: number }
  | { case: "failure"; error: string; reason: string; permanent: boolean; retryAfterMs?: number; runtime?: number };

function truncate(s: string): string {
  const b = Buffer.from(s, "utf8");
  if (b.length <= MAX_ERROR_BYTES) return s;
  return b.subarray(0, MAX_ERROR_BYTES - 3).toString("utf8") + "…";
}
