import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";

import { Client, JqError, Worker } from "../src/index.js";
import { Server } from "./server.js";

function haveOpenssl(): boolean {
  try {
    execFileSync("openssl", ["version"], { stdio: "ignore" });
    return true;
  } catch {
    return false;
  }
}

describe("mTLS", { skip: haveOpenssl() ? false : "openssl is not installed: the mTLS test needs it to make certificates" }, () => {
  const d = mkdtempSync(join(tmpdir(), "jq-sdk-tls-"));
  const ssl = (...args: string[]) => execFileSync("openssl", args, { cwd: d, stdio: "ignore" });
  let srv: Server;
  const pem = (name: string) => ({ ca: readFileSync(join(d, "ca.pem")), cert: readFileSync(join(d, `${name}.pem`)), key: readFileSync(join(d, `${name}.key`)) });

  before(async () => {
    ssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "1", "-subj", "/CN=test-ca",
      "-keyout", "ca.key", "-out", "ca.pem");
    for (const [name, ext] of [["server", "subjectAltName=IP:127.0.0.1"], ["worker-1", "extendedKeyUsage=clientAuth"], ["admin", "extendedKeyUsage=clientAuth"]]) {
      ssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-subj", `/CN=${name}`, "-keyout", `${name}.key`, "-out", `${name}.csr`);
      writeFileSync(join(d, `${name}.ext`), ext + "\n");
      ssl("x509", "-req", "-in", `${name}.csr`, "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial", "-days", "1",
        "-extfile", `${name}.ext`, "-out", `${name}.pem`);
    }
    srv = await Server.start({
      JQ_GRPC_TLS_ENABLED: "true", JQ_GRPC_TLS_CERT_PATH: join(d, "server.pem"), JQ_GRPC_TLS_KEY_PATH: join(d, "server.key"),
      JQ_GRPC_TLS_CLIENT_CA_PATH: join(d, "ca.pem"), JQ_AUTH_ENABLED: "true",
      JQ_AUTH_MTLS_PRINCIPALS: "cn=admin;roles=admin,cn=worker-*;roles=worker",
    });
  });
  after(async () => {
    await srv?.close();
    rmSync(d, { recursive: true, force: true });
  });

  it("authenticates client and worker by certificate", async () => {
    const c = new Client({ addr: srv.addr, tls: pem("admin") });
    await c.createQueue("tls-q");
    const id = await c.submit("tls-q", "echo", "over mTLS", { keepResult: true });
    const w = new Worker({ addr: srv.addr, tls: pem("worker-1"), queues: ["tls-q"], handlers: { echo: (ctx) => ctx.payload } });
    const run = w.run();
    assert.equal(new TextDecoder().decode(await c.waitResult(id, { timeoutMs: 20_000 })), "over mTLS");
    w.stop();
    await run;
    // A worker certificate may not act as an admin; no certificate at all is refused at the handshake.
    await assert.rejects(new Client({ addr: srv.addr, tls: pem("worker-1") }).createQueue("x"),
      (e: unknown) => e instanceof JqError && e.code === "permission_denied");
    await assert.rejects(new Client({ addr: srv.addr, tls: { ca: readFileSync(join(d, "ca.pem")) } }).get(id),
      (e: unknown) => e instanceof JqError);
  });
});
