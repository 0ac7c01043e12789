// The TypeScript worker of the conformance suite (test/conformance): one handler per scenario, chosen by
// job type. Stops in two phases on SIGTERM; prints its counters as one JSON line on exit.
//
//   node dist/conformance/worker.js --addr 127.0.0.1:50051 --queue q --concurrency 4 [--worker-id W] [--grace S]
import { parseArgs } from "node:util";

import { PermanentError, RetryAfterError, Worker, type Handler, type JobContext } from "../src/index.js";

const { values: a } = parseArgs({
  options: {
    addr: { type: "string" }, queue: { type: "string", multiple: true }, concurrency: { type: "string", default: "4" },
    prefetch: { type: "string", default: "0" }, "worker-id": { type: "string" }, grace: { type: "string", default: "30" },
  },
});

const payload = (ctx: JobContext) => (ctx.payload.length ? ctx.json<Record<string, number>>() : {});

function sleepMs(ctx: JobContext, ms: number): Promise<void> {
  return new Promise((resolve, reject) => {
    if (ctx.signal.aborted) return reject(ctx.signal.reason);
    const t = setTimeout(resolve, ms);
    ctx.signal.addEventListener("abort", () => {
      clearTimeout(t);
      reject(ctx.signal.reason);
    }, { once: true });
  });
}

const succeed = (ctx: JobContext) => ({ ok: true, attempt: ctx.attempt, lang: "typescript" });

const handlers: Record<string, Handler> = {
  succeed,
  fail_once: (ctx) => {
    if (ctx.job.retryCount === 0) throw new Error("first attempt fails");
    return succeed(ctx);
  },
  fail_permanent: () => {
    throw new PermanentError("cannot succeed");
  },
  retry_after: (ctx) => {
    if (ctx.job.retryCount === 0) throw new RetryAfterError(payload(ctx).seconds ?? 2);
    return succeed(ctx);
  },
  sleep: async (ctx) => {
    await sleepMs(ctx, payload(ctx).ms ?? 0);
    return succeed(ctx);
  },
  progress: async (ctx) => {
    for (const p of [25, 50, 75]) {
      ctx.progress(p, `step ${p}`);
      await sleepMs(ctx, payload(ctx).step_ms ?? 1200);
    }
    return succeed(ctx);
  },
  noop: () => undefined,
};

const w = new Worker({
  addr: a.addr, queues: a.queue ?? [], handlers, concurrency: Number(a.concurrency), prefetch: Number(a.prefetch),
  workerId: a["worker-id"], token: process.env.JQ_TOKEN || undefined, shutdownGraceMs: Number(a.grace) * 1000,
});
await w.runUntilSignal();
console.log(JSON.stringify(w.stats));
