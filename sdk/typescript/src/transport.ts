import type { Interceptor, Transport } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";

/** Where and how to reach a jq server. */
export interface ConnectionOptions {
  /** host:port, or a URL (https:// turns TLS on). Default localhost:50051. */
  addr?: string;
  /** API token, sent as `Authorization: Bearer`. */
  token?: string;
  /** TLS: the CA that signs the server's certificate, and a client certificate and key for mTLS (PEM). */
  tls?: { ca?: string | Buffer; cert?: string | Buffer; key?: string | Buffer };
  /** "2" (default: HTTP/2, h2c without TLS, with pings that notice a dead connection) or "1.1". */
  httpVersion?: "1.1" | "2";
  /** Default deadline of a unary call, ms (default 10 s). */
  timeoutMs?: number;
  /** An existing transport (tests, custom interceptors); the options above are then ignored. */
  transport?: Transport;
}

/** newTransport makes the Connect transport for the options: protobuf binary, bearer token, TLS. */
export function newTransport(o: ConnectionOptions): Transport {
  if (o.transport) return o.transport;
  let addr = o.addr ?? "localhost:50051";
  if (!addr.includes("://")) addr = (o.tls ? "https://" : "http://") + addr;
  const interceptors: Interceptor[] = [];
  if (o.token) {
    const auth = "Bearer " + o.token;
    interceptors.push((next) => (req) => {
      req.header.set("Authorization", auth);
      return next(req);
    });
  }
  const tls = o.tls ? { ca: o.tls.ca, cert: o.tls.cert, key: o.tls.key } : {};
  if (o.httpVersion === "1.1") {
    return createConnectTransport({
      baseUrl: addr, httpVersion: "1.1", useBinaryFormat: true, interceptors,
      defaultTimeoutMs: o.timeoutMs ?? 10_000, nodeOptions: tls,
    });
  }
  return createConnectTransport({
    baseUrl: addr, httpVersion: "2", useBinaryFormat: true, interceptors,
    defaultTimeoutMs: o.timeoutMs ?? 10_000, nodeOptions: tls,
    // A silent or cut connection is noticed within ~2 s, as the Go worker's HTTP/2 pings do.
    pingIntervalMs: 1000, pingTimeoutMs: 1000, pingIdleConnection: false,
  });
}
