// A producer: submits one "fetch" job per URL given on the command line in one atomic batch, waits for each
// and prints its result; exits 1 when one failed.
//
//   JQ_ADDR=localhost:50051 node dist/examples/producer.js https://example.com/ https://example.org/
import { Client, JobFailedError, jobSpec } from "../src/index.js";

const urls = process.argv.slice(2);
const queue = process.env.JQ_QUEUE ?? "default";
const c = new Client({ addr: process.env.JQ_ADDR ?? "localhost:50051", token: process.env.JQ_TOKEN });
const jobs = await c.submitMany(urls.map((url) => jobSpec(queue, "fetch", { url }, { keepResult: true, maxRetries: 3 })));
let failed = 0;
for (const [i, { jobId }] of jobs.entries()) {
  try {
    const result = JSON.parse(new TextDecoder().decode(await c.waitResult(jobId, { timeoutMs: 60_000 })));
    console.log(JSON.stringify({ url: urls[i], job_id: jobId, result }));
  } catch (e) {
    if (!(e instanceof JobFailedError)) throw e;
    failed++;
    console.log(JSON.stringify({ url: urls[i], job_id: jobId, error: e.lastError }));
  }
}
process.exitCode = failed ? 1 : 0;
