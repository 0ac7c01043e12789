import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";

import { Client, JobCancelledError, JobState, PermanentError, RetryAfterError, Worker, jobSpec, type Handler,
  type JobContext, type WorkerOptions } from "../src/index.js";
import { Server, eventually } from "./server.js";

const text = (b: Uint8Array) => new TextDecoder().decode(b);

/** sleeps the payload's ms, cooperatively: rejects with the abort reason when the job is cancelled. */
function sleeper(ctx: JobContext): Promise<string> {
  const ms = ctx.json<{ ms: number }>().ms;
  return new Promise((resolve, reject) => {
    const t = setTimeout(() => resolve("slept"), ms);
    ctx.signal.addEventListener("abort", () => {
      clearTimeout(t);
      reject(ctx.signal.reason);
    }, { once: true });
  });
}

describe("worker", () => {
  let srv: Server;
  let c: Client;
  let n = 0;
  const workers: { w: Worker; run: Promise<void> }[] = [];
  const queue = async () => {
    const q = `q-tsw-${process.pid}-${n++}`;
    await c.createQueue(q, { backoffBaseMs: 200, backoffMaxMs: 500 });
    return q;
  };
  const start = (q: string, handlers: Record<string, Handler>, o: Partial<WorkerOptions> = {}) => {
    const w = new Worker({ addr: srv.addr, queues: [q], handlers, shutdownGraceMs: 10_000, minBackoffMs: 50, ...o });
    const run = w.run();
    workers.push({ w, run });
    return { w, run };
  };
  const transitions = async (id: string) =>
    (await c.events(id)).map((e) => [JobState[e.fromState], JobState[e.toState], e.reason].join(" "));

  before(async () => {
    srv = await Server.start();
    c = new Client({ addr: srv.addr });
  });
  after(async () => {
    for (const { w, run } of workers) {
      w.stop();
      await run;
    }
    await srv.close();
  });

  it("runs a job and reports its result", async () => {
    const q = await queue();
    start(q, { greet: (ctx) => ({ hello: ctx.json<{ name: string }>().name }) });
    const id = await c.submit(q, "greet", { name: "Ada" }, { keepResult: true });
    assert.equal(text(await c.waitResult(id, { timeoutMs: 20_000 })), '{"hello":"Ada"}');
    assert.deepEqual((await transitions(id)).map((t) => t.split(" ")[1]), ["PENDING", "ASSIGNED", "RUNNING", "DONE"]);
  });

  it("retries a failure; dead-letters a permanent one at once", async () => {
    const q = await queue();
    start(q, {
      flaky: (ctx) => {
        if (ctx.attempt === 1) throw new Error("boom");
        return "ok";
      },
      bad: () => {
        throw new PermanentError("bad input");
      },
    });
    const a = await c.submit(q, "flaky", null, { maxRetries: 2 });
    const b = await c.submit(q, "bad", null, { maxRetries: 5 });
    const ja = await c.wait(a, { timeoutMs: 20_000 });
    assert.equal(ja.state, JobState.DONE);
    assert.equal(ja.attempt, 2);
    assert.ok((await transitions(a)).includes("RUNNING FAILED error"));
    const jb = await c.wait(b, { timeoutMs: 20_000 });
    assert.equal(jb.state, JobState.DEAD_LETTERED);
    assert.equal(jb.attempt, 1);
    assert.match(jb.lastError, /bad input/);
  });

  it("honours Retry-After", async () => {
    const q = await queue();
    const starts: number[] = [];
    start(q, {
      limited: (ctx) => {
        starts.push(performance.now());
        if (ctx.attempt === 1) throw new RetryAfterError(2, "429 from upstream");
        return "ok";
      },
    });
    const id = await c.submit(q, "limited", null, { maxRetries: 2 });
    assert.equal((await c.wait(id, { timeoutMs: 30_000 })).state, JobState.DONE);
    assert.ok(starts[1] - starts[0] >= 1900, `second attempt after ${starts[1] - starts[0]} ms`);
  });

  it("aborts a job at its timeout", async () => {
    const q = await queue();
    start(q, { sleep: sleeper });
    const id = await c.submit(q, "sleep", { ms: 30_000 }, { timeoutMs: 1000, maxRetries: 0 });
    const j = await c.wait(id, { timeoutMs: 20_000 });
    assert.equal(j.state, JobState.DEAD_LETTERED);
    assert.equal(j.failureReason, "timeout");
  });

  it("cancels a running job through its AbortSignal", async () => {
    const q = await queue();
    const reasons: unknown[] = [];
    start(q, {
      long: async (ctx) => {
        try {
          return await sleeper(ctx);
        } catch (e) {
          reasons.push(e);
          throw e;
        }
      },
    });
    const id = await c.submit(q, "long", { ms: 60_000 });
    await eventually(async () => (await c.get(id)).state === JobState.RUNNING, "RUNNING");
    assert.equal((await c.cancel(id)).cancelRequested, true);
    const j = await c.wait(id, { timeoutMs: 20_000 });
    assert.equal(j.state, JobState.DEAD_LETTERED);
    assert.equal(j.failureReason, "cancelled");
    assert.ok(reasons[0] instanceof JobCancelledError && reasons[0].cause === "cancelled");
  });

  it("sends progress while the job runs", async () => {
    const q = await queue();
    let release!: () => void;
    const released = new Promise<void>((r) => (release = r));
    start(q, {
      slow: async (ctx) => {
        ctx.progress(10, "starting");
        ctx.progress(42, "half way");
        await released;
        return "ok";
      },
    });
    const id = await c.submit(q, "slow");
    const j = await eventually(async () => {
      const j = await c.get(id);
      return j.progress?.percent === 42 ? j : undefined;
    }, "progress 42");
    assert.equal(j?.progress?.message, "half way");
    release();
    assert.equal((await c.wait(id, { timeoutMs: 20_000 })).state, JobState.DONE);
  });

  it("stops gracefully: jobs in flight finish and are reported, then it deregisters", async () => {
    const q = await queue();
    let started!: () => void;
    const isStarted = new Promise<void>((r) => (started = r));
    const { w, run } = start(q, {
      work: async () => {
        started();
        await new Promise((r) => setTimeout(r, 1000));
        return "finished";
      },
    });
    const id = await c.submit(q, "work");
    await isStarted;
    w.stop();
    await run;
    assert.equal((await c.get(id)).state, JobState.DONE);
    const ws = (await c.workers.listWorkers({})).workers.filter((x) => x.id === w.workerId);
    assert.equal(ws[0]?.status, 3 /* OFFLINE */);
  });

  it("obeys the operator's SHUTDOWN: drains, deregisters, run() resolves", async () => {
    const q = await queue();
    const w = new Worker({ addr: srv.addr, queues: [q], handlers: { echo: (ctx) => ctx.payload }, minBackoffMs: 50 });
    const run = w.run();
    assert.equal(text(await c.waitResult(await c.submit(q, "echo", "x", { keepResult: true }), { timeoutMs: 20_000 })), "x");
    await c.workers.shutdownWorker({ workerId: w.workerId });
    await run; // the next heartbeat carries SHUTDOWN
    const ws = (await c.workers.listWorkers({})).workers.filter((x) => x.id === w.workerId);
    assert.equal(ws[0]?.status, 3 /* OFFLINE */);
  });

  it("fences itself when its heartbeats go unanswered", async () => {
    const q = await queue();
    const causes: string[] = [];
    let started!: () => void;
    const isStarted = new Promise<void>((r) => (started = r));
    const { w } = start(q, {
      long: async (ctx) => {
        started();
        try {
          return await sleeper(ctx);
        } catch (e) {
          causes.push((e as JobCancelledError).cause);
          throw e;
        }
      },
    });
    const id = await c.submit(q, "long", { ms: 60_000 }, { maxRetries: 3 });
    await isStarted;
    const t0 = performance.now();
    srv.proc!.kill("SIGSTOP");
    try {
      await eventually(() => causes.length > 0, "fenced", 10_000);
    } finally {
      srv.proc!.kill("SIGCONT");
    }
    assert.ok(performance.now() - t0 < 4000, "fenced before the server's 4 s heartbeat timeout");
    assert.deepEqual(causes, ["lease_expired"]);
    assert.equal(w.stats.fenced, 1);
    await eventually(async () => (await transitions(id)).some((t) => t.includes(" FAILED ")), "attempt failed");
  });

  it("reconnects after a server restart", async () => {
    const q = await queue();
    start(q, { echo: (ctx) => ctx.payload });
    assert.equal(text(await c.waitResult(await c.submit(q, "echo", "1", { keepResult: true }), { timeoutMs: 20_000 })), "1");
    await srv.stop();
    await srv.run();
    assert.equal(text(await c.waitResult(await c.submit(q, "echo", "2", { keepResult: true }), { timeoutMs: 30_000 })), "2");
  });

  it("keeps to its concurrency and batches reports under load", async () => {
    const q = await queue();
    let now = 0;
    let peak = 0;
    const { w } = start(q, {
      count: async () => {
        peak = Math.max(peak, ++now);
        await new Promise((r) => setTimeout(r, 20));
        now--;
      },
    }, { concurrency: 3, prefetch: 3 });
    const ids = (await c.submitMany(Array.from({ length: 200 }, () => jobSpec(q, "count")))).map((r) => r.jobId);
    for (const id of ids.slice(-5)) await c.wait(id, { timeoutMs: 60_000 });
    await eventually(() => (w.stats.succeeded ?? 0) === 200, "200 succeeded");
    assert.ok(peak <= 3, `peak ${peak}`);
  });
});
