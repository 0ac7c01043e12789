import { Code, ConnectError } from "@connectrpc/connect";

/** Connect codes in their wire form ("not_found"), as the server and the other SDKs name them. */
export type ErrorCode =
  | "canceled" | "unknown" | "invalid_argument" | "deadline_exceeded" | "not_found" | "already_exists"
  | "permission_denied" | "resource_exhausted" | "failed_precondition" | "aborted" | "out_of_range"
  | "unimplemented" | "internal" | "unavailable" | "data_loss" | "unauthenticated";

const names: Record<Code, ErrorCode> = {
  [Code.Canceled]: "canceled",
  [Code.Unknown]: "unknown",
  [Code.InvalidArgument]: "invalid_argument",
  [Code.DeadlineExceeded]: "deadline_exceeded",
  [Code.NotFound]: "not_found",
  [Code.AlreadyExists]: "already_exists",
  [Code.PermissionDenied]: "permission_denied",
  [Code.ResourceExhausted]: "resource_exhausted",
  [Code.FailedPrecondition]: "failed_precondition",
  [Code.Aborted]: "aborted",
  [Code.OutOfRange]: "out_of_range",
  [Code.Unimplemented]: "unimplemented",
  [Code.Internal]: "internal",
  [Code.Unavailable]: "unavailable",
  [Code.DataLoss]: "data_loss",
  [Code.Unauthenticated]: "unauthenticated",
};

/**
 * An error answered by the jq server (or the transport to it): `code` is the Connect code
 * ("invalid_argument"), `serverMessage` the server's one-line reason. Match on `code`:
 *
 *     try { await client.get(id) } catch (e) { if (e instanceof JqError && e.code === "not_found") ... }
 */
export class JqError extends Error {
  readonly code: ErrorCode;
  readonly serverMessage: string;
  constructor(code: ErrorCode, serverMessage: string, options?: { cause?: unknown }) {
    super(`${code}: ${serverMessage}`, options);
    this.name = "JqError";
    this.code = code;
    this.serverMessage = serverMessage;
  }
}

/** toJqError maps anything a Connect call throws to a JqError (an AbortError becomes "canceled"). */
export function toJqError(e: unknown): JqError {
  if (e instanceof JqError) return e;
  const ce = ConnectError.from(e);
  return new JqError(names[ce.code] ?? "unknown", ce.rawMessage, { cause: e });
}

/** isCode tells whether e is a JqError (or a Connect error) with one of the codes. */
export function isCode(e: unknown, ...codes: ErrorCode[]): boolean {
  if (e instanceof JqError) return codes.includes(e.code);
  if (e instanceof ConnectError) return codes.includes(names[e.code]);
  return false;
}

/** Thrown by a handler when no other attempt can succeed: the job is dead-lettered at once. */
export class PermanentError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "PermanentError";
  }
}

/**
 * Thrown by a handler to fail the attempt and ask that the next one waits at least `seconds`
 * (an HTTP 429/503's Retry-After); the queue's backoff applies when longer.
 */
export class RetryAfterError extends Error {
  readonly seconds: number;
  constructor(seconds: number, message?: string) {
    super(message ?? `retry after ${seconds}s`);
    this.name = "RetryAfterError";
    this.seconds = seconds;
  }
}

/** Raised by `client.waitResult` when the job ended without success. */
export class JobFailedError extends Error {
  constructor(readonly jobId: string, readonly state: string, readonly reason: string, readonly lastError: string) {
    super(`job ${jobId} ended ${state}: ${reason || "error"}: ${lastError}`);
    this.name = "JobFailedError";
  }
}
