import { spawn, execFile } from "node:child_process";
import { createServer } from "node:http";
import { join } from "node:path";
import { after, before, it } from "node:test";
import assert from "node:assert/strict";
import { promisify } from "node:util";

import { Client } from "../src/index.js";
import { Server } from "./server.js";

const examples = join(import.meta.dirname, "..", "examples");
let srv: Server;
before(async () => {
  srv = await Server.start();
});
after(async () => srv.close());

it("the HTTP worker and the producer examples", async () => {
  const api = createServer((req, res) => {
    if (req.url === "/missing") {
      res.writeHead(404).end();
      return;
    }
    res.end("hello from " + req.url);
  });
  await new Promise<void>((r) => api.listen(0, "127.0.0.1", r));
  const base = `http://127.0.0.1:${(api.address() as { port: number }).port}`;
  const q = "examples-ts";
  await new Client({ addr: srv.addr }).createQueue(q);
  const env = { ...process.env, JQ_ADDR: srv.addr, JQ_QUEUE: q };
  const worker = spawn(process.execPath, [join(examples, "http-worker.js")], { env, stdio: ["ignore", "inherit", "inherit"] });
  const exited = new Promise<number | null>((r) => worker.once("exit", r));
  try {
    const out = await promisify(execFile)(process.execPath, [join(examples, "producer.js"), base + "/a", base + "/missing"], { env })
      .then((r) => ({ code: 0, stdout: r.stdout }), (e) => ({ code: e.code as number, stdout: e.stdout as string }));
    assert.equal(out.code, 1);
    const lines = out.stdout.trim().split("\n").map((l) => JSON.parse(l));
    assert.equal(lines[0].result.status, 200);
    assert.equal(lines[0].result.bytes, "hello from /a".length);
    assert.match(lines[1].error, /HTTP 404/);
  } finally {
    worker.kill("SIGTERM");
    assert.equal(await exited, 0);
    api.close();
  }
});
