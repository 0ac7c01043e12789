// A real jq server for the tests: `jq --role=server` on the embedded store, on free ports. The binary
// is $JQ_BIN, else built once from the repository with `go build`.
import { execFileSync, spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, openSync, readFileSync, rmSync, statSync, closeSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";

const repo = resolve(import.meta.dirname, "..", "..", "..", "..");
let built: string | undefined;

export function jqBinary(): string {
  if (process.env.JQ_BIN) return process.env.JQ_BIN;
  if (!built) {
    const d = mkdtempSync(join(tmpdir(), "jq-sdk-bin-"));
    built = join(d, "jq");
    execFileSync("go", ["build", "-o", built, "."], { cwd: repo, stdio: "inherit" });
  }
  return built;
}

export function freePort(): Promise<number> {
  return new Promise((res, rej) => {
    const s = createServer();
    s.listen(0, "127.0.0.1", () => {
      const a = s.address();
      s.close(() => (typeof a === "object" && a ? res(a.port) : rej(new Error("no port"))));
    });
  });
}

export class Server {
  dir = mkdtempSync(join(tmpdir(), "jq-sdk-srv-"));
  logPath = join(this.dir, "server.log");
  proc?: ChildProcess;
  env: Record<string, string> = {};
  addr = "";

  static async start(extra: Record<string, string> = {}, heartbeatTimeoutS = 4): Promise<Server> {
    const s = new Server();
    const port = await freePort();
    s.addr = `127.0.0.1:${port}`;
    s.env = {
      ...(process.env as Record<string, string>),
      JQ_STORE_DRIVER: "sqlite", JQ_STORE_DATA_DIR: join(s.dir, "data"), JQ_GRPC_HOST: "127.0.0.1",
      JQ_GRPC_PORT: String(port), JQ_HEALTH_PORT: String(await freePort()), JQ_METRICS_PORT: String(await freePort()),
      JQ_SCHEDULER_WORKER_HEARTBEAT_TIMEOUT_S: String(heartbeatTimeoutS), JQ_WORKER_HEARTBEAT_INTERVAL_S: "1",
      JQ_SCHEDULER_REAPER_INTERVAL_MS: "200", ...extra,
    };
    await s.run();
    return s;
  }

  async run(timeoutMs = 60_000): Promise<void> {
    let mark = 0;
    try {
      mark = statSync(this.logPath).size;
    } catch { /* first start */ }
    const fd = openSync(this.logPath, "a");
    this.proc = spawn(jqBinary(), ["--role=server"], { env: this.env, stdio: ["ignore", fd, fd] });
    closeSync(fd);
    const end = Date.now() + timeoutMs;
    while (Date.now() < end) {
      if (readFileSync(this.logPath).subarray(mark).includes('"server started"')) return;
      if (this.proc.exitCode !== null) throw new Error(`jq server exited: ${this.log().slice(-2000)}`);
      await new Promise((r) => setTimeout(r, 50));
    }
    throw new Error(`jq server did not start: ${this.log().slice(-2000)}`);
  }

  log(): string {
    return readFileSync(this.logPath, "utf8");
  }

  async stop(): Promise<void> {
    const p = this.proc;
    if (!p || p.exitCode !== null || p.signalCode !== null) return;
    const exited = new Promise((r) => p.once("exit", r));
    p.kill("SIGTERM");
    await exited;
  }

  async close(): Promise<void> {
    await this.stop();
    rmSync(this.dir, { recursive: true, force: true });
  }
}

/** eventually polls f until it returns a truthy value (returned) or the timeout passes. */
export async function eventually<T>(f: () => Promise<T> | T, what: string, timeoutMs = 20_000): Promise<T> {
  const end = Date.now() + timeoutMs;
  let last: unknown;
  while (Date.now() < end) {
    try {
      const v = await f();
      if (v) return v;
    } catch (e) {
      last = e;
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`${what} not reached within ${timeoutMs} ms${last ? `: ${last}` : ""}`);
}
