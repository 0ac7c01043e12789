import type { Duration, Timestamp } from "@bufbuild/protobuf/wkt";

/** A payload or result: bytes as they are, a string as its UTF-8, anything else as its JSON text. */
export type Payload = Uint8Array | string | number | boolean | object | null | undefined;

const enc = new TextEncoder();
const dec = new TextDecoder();

export function toBytes(p: Payload): Uint8Array {
  if (p === undefined || p === null) return new Uint8Array(0);
  if (p instanceof Uint8Array) return p;
  if (typeof p === "string") return enc.encode(p);
  return enc.encode(JSON.stringify(p));
}

export function text(b: Uint8Array): string {
  return dec.decode(b);
}

export function durationFromMs(ms: number): Duration {
  const seconds = Math.floor(ms / 1000);
  return { $typeName: "google.protobuf.Duration", seconds: BigInt(seconds), nanos: Math.round((ms - seconds * 1000) * 1e6) };
}

export function durationMs(d: Duration | undefined): number {
  if (!d) return 0;
  return Number(d.seconds) * 1000 + d.nanos / 1e6;
}

export function timestampFromDate(t: Date): Timestamp {
  const ms = t.getTime();
  const seconds = Math.floor(ms / 1000);
  return { $typeName: "google.protobuf.Timestamp", seconds: BigInt(seconds), nanos: (ms - seconds * 1000) * 1e6 };
}

export function timestampMs(t: Timestamp | undefined): number {
  if (!t) return 0;
  return Number(t.seconds) * 1000 + t.nanos / 1e6;
}

/** sleep resolves after ms, or at once when the signal aborts. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const t = setTimeout(done, ms);
    function done() {
      clearTimeout(t);
      signal?.removeEventListener("abort", done);
      resolve();
    }
    signal?.addEventListener("abort", done, { once: true });
  });
}

/** backoff is capped exponential backoff with jitter in its upper half. */
export function backoff(attempt: number, lo: number, hi: number): number {
  const d = Math.min(hi, lo * 2 ** Math.min(attempt, 20));
  return d / 2 + (Math.random() * d) / 2;
}
