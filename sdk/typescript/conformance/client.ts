// The TypeScript client of the conformance suite's cross-language test: submits one job, waits for it
// and prints its result bytes.
//
//   node dist/conformance/client.js --addr 127.0.0.1:50051 --queue q --type succeed
import { parseArgs } from "node:util";

import { Client } from "../src/index.js";

const { values: a } = parseArgs({
  options: { addr: { type: "string" }, queue: { type: "string" }, type: { type: "string", default: "succeed" } },
});
const c = new Client({ addr: a.addr, token: process.env.JQ_TOKEN || undefined });
const id = await c.submit(a.queue!, a.type!, { from: "typescript" }, { keepResult: true });
process.stdout.write(Buffer.concat([await c.waitResult(id, { timeoutMs: 60_000 }), Buffer.from("\n")]));
