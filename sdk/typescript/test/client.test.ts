import { createHash, randomBytes } from "node:crypto";
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";

import { Client, JobState, JqError, JobFailedError, Worker, jobSpec } from "../src/index.js";
import { Server } from "./server.js";

const text = (b: Uint8Array) => new TextDecoder().decode(b);

describe("client", () => {
  let srv: Server;
  let c: Client;
  let n = 0;
  const queue = async () => {
    const q = `q-ts-${process.pid}-${n++}`;
    await c.createQueue(q, { backoffBaseMs: 200, backoffMaxMs: 500 });
    return q;
  };
  before(async () => {
    srv = await Server.start();
    c = new Client({ addr: srv.addr });
  });
  after(async () => srv.close());

  it("submits and reads jobs, payload bytes exactly", async () => {
    const q = await queue();
    const raw = new TextEncoder().encode('{"a": 1,  "b": [true]}');
    const id = await c.submit(q, "t", raw);
    const j = await c.get(id);
    assert.equal(j.state, JobState.PENDING);
    assert.deepEqual(j.payload, raw);
    assert.equal(text((await c.get(await c.submit(q, "t", { x: "é" }))).payload), '{"x":"é"}');
    const many = await c.submitMany([1, 2, 3].map((i) => jobSpec(q, "t", { i })));
    assert.equal(new Set(many.map((m) => m.jobId)).size, 3);
    const a = await c.submit(q, "t", "p", { idempotencyKey: "k" });
    assert.equal(await c.submit(q, "t", "p", { idempotencyKey: "k" }), a);
  });

  it("maps errors to JqError with the server's code and message", async () => {
    await assert.rejects(c.get("nope"), (e: unknown) =>
      e instanceof JqError && e.code === "invalid_argument" && e.serverMessage.includes("not a UUID"));
    await assert.rejects(c.get("6f0a1c8e-3b5d-4a8e-9c1f-2d3e4f5a6b7c"), (e: unknown) => e instanceof JqError && e.code === "not_found");
    await assert.rejects(new Client({ addr: "127.0.0.1:1" }).get("6f0a1c8e-3b5d-4a8e-9c1f-2d3e4f5a6b7c"),
      (e: unknown) => e instanceof JqError && e.code === "unavailable");
  });

  it("cancels a pending job; wait, waitResult and result tell", async () => {
    const q = await queue();
    const id = await c.submit(q, "t");
    assert.equal((await c.result(id)).found, false);
    const r = await c.cancel(id);
    assert.equal(r.cancelRequested, false);
    assert.equal(r.job.state, JobState.DEAD_LETTERED);
    assert.equal((await c.wait(id, { timeoutMs: 5000 })).state, JobState.DEAD_LETTERED);
    await assert.rejects(c.waitResult(id, { timeoutMs: 5000 }), JobFailedError);
    assert.equal((await c.result(id)).reason, "cancelled");
  });

  it("wait ends at its timeout and with its AbortSignal", async () => {
    const q = await queue();
    const id = await c.submit(q, "t");
    await assert.rejects(c.wait(id, { timeoutMs: 300 }), (e: unknown) => e instanceof JqError && e.code === "deadline_exceeded");
    const ac = new AbortController();
    setTimeout(() => ac.abort(), 200);
    await assert.rejects(c.wait(id, { signal: ac.signal }), (e: unknown) => e instanceof JqError && e.code === "canceled");
  });

  it("works over HTTP/1.1 too", async () => {
    const q = await queue();
    const c1 = new Client({ addr: srv.addr, httpVersion: "1.1" });
    const id = await c1.submit(q, "echo", "over 1.1", { keepResult: true });
    const w = new Worker({ addr: srv.addr, httpVersion: "1.1", queues: [q], handlers: { echo: (ctx) => ctx.payload } });
    const run = w.run();
    assert.equal(text(await c1.waitResult(id, { timeoutMs: 20_000 })), "over 1.1");
    w.stop();
    await run;
  });
});

describe("auth", () => {
  const admin = "jq_" + randomBytes(24).toString("base64url");
  const worker = "jq_" + randomBytes(24).toString("base64url");
  const entry = (name: string, roles: string, tok: string) =>
    `name=${name};roles=${roles};sha256=${createHash("sha256").update(tok).digest("hex")}`;
  let srv: Server;
  before(async () => {
    srv = await Server.start({
      JQ_AUTH_ENABLED: "true", JQ_AUTH_ALLOW_INSECURE: "true",
      JQ_AUTH_TOKENS: [entry("ops", "admin", admin), entry("w", "worker", worker)].join(","),
    });
  });
  after(async () => srv.close());

  it("sends the bearer token; refusals carry the server's code", async () => {
    const c = new Client({ addr: srv.addr, token: admin });
    await c.createQueue("auth-q");
    await assert.rejects(new Client({ addr: srv.addr }).submit("auth-q", "t"),
      (e: unknown) => e instanceof JqError && e.code === "unauthenticated");
    await assert.rejects(new Client({ addr: srv.addr, token: worker }).submit("auth-q", "t"),
      (e: unknown) => e instanceof JqError && e.code === "permission_denied");
    // A worker whose registration is refused stops and says why.
    await assert.rejects(new Worker({ addr: srv.addr, token: "jq_wrong", queues: ["auth-q"], handlers: { echo: (ctx) => ctx.payload } }).run(),
      (e: unknown) => e instanceof JqError && e.code === "unauthenticated");
    const id = await c.submit("auth-q", "echo", "hi", { keepResult: true });
    const w = new Worker({ addr: srv.addr, token: worker, queues: ["auth-q"], handlers: { echo: (ctx) => ctx.payload } });
    const run = w.run();
    assert.equal(text(await c.waitResult(id, { timeoutMs: 20_000 })), "hi");
    w.stop();
    await run;
  });
});
