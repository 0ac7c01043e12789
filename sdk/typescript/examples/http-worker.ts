// A worker that calls an HTTP API for each job of type "fetch": the payload {"url": ...} is fetched and its
// status and size become the result. A 429 or 503 retries after its Retry-After, another 4xx is permanent,
// and the job's AbortSignal (CancelJob, its timeout, shutdown) aborts the request.
//
//   JQ_ADDR=localhost:50051 node dist/examples/http-worker.js    # SIGTERM/Ctrl-C: finishes the jobs in flight
import { createHash } from "node:crypto";

import { PermanentError, RetryAfterError, Worker, type JobContext } from "../src/index.js";

async function fetchJob(ctx: JobContext) {
  const { url } = ctx.json<{ url: string }>();
  const resp = await fetch(url, { signal: ctx.signal });
  if (resp.status === 429 || resp.status === 503) {
    throw new RetryAfterError(Number(resp.headers.get("retry-after") ?? "1"), `${url}: HTTP ${resp.status}`);
  }
  if (resp.status >= 400 && resp.status < 500) throw new PermanentError(`${url}: HTTP ${resp.status}`);
  if (!resp.ok) throw new Error(`${url}: HTTP ${resp.status}`);
  const body = Buffer.from(await resp.arrayBuffer());
  ctx.progress(100, "fetched");
  return { url, status: resp.status, bytes: body.length, sha256: createHash("sha256").update(body).digest("hex") };
}

await new Worker({
  addr: process.env.JQ_ADDR ?? "localhost:50051", token: process.env.JQ_TOKEN,
  queues: [process.env.JQ_QUEUE ?? "default"], handlers: { fetch: fetchJob },
  concurrency: Number(process.env.JQ_CONCURRENCY ?? "8"),
}).runUntilSignal();
