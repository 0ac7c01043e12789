"""Exceptions of the jq SDK.

Every error the server returns is a :class:`JqError` carrying the Connect code (``"not_found"``) and the
server's one-line message; each code has its own subclass, so callers catch what they can handle::

    try:
        client.get(job_id)
    except jqsdk.NotFound:
        ...
"""

from __future__ import annotations


class JqError(Exception):
    """An error answered by the jq server (or the transport to it).

    ``code`` is the Connect code in its wire form (``"invalid_argument"``), ``message`` the server's text.
    """

    code = "unknown"

    def __init__(self, message: str, code: str | None = None):
        super().__init__(message)
        if code is not None:
            self.code = code
        self.message = message

    def __str__(self) -> str:
        return f"{self.code}: {self.message}"


class Canceled(JqError):
    code = "canceled"


class Unknown(JqError):
    code = "unknown"


class InvalidArgument(JqError):
    code = "invalid_argument"


class DeadlineExceeded(JqError):
    code = "deadline_exceeded"


class NotFound(JqError):
    code = "not_found"


class AlreadyExists(JqError):
    code = "already_exists"


class PermissionDenied(JqError):
    code = "permission_denied"


class ResourceExhausted(JqError):
    code = "resource_exhausted"


class FailedPrecondition(JqError):
    code = "failed_precondition"


class Aborted(JqError):
    code = "aborted"


class OutOfRange(JqError):
    code = "out_of_range"


class Unimplemented(JqError):
    code = "unimplemented"


class Internal(JqError):
    code = "internal"


class Unavailable(JqError):
    """The server could not be reached or is shutting down; retrying may help."""

    code = "unavailable"


class DataLoss(JqError):
    code = "data_loss"


class Unauthenticated(JqError):
    code = "unauthenticated"


_BY_CODE = {c.code: c for c in (
    Canceled, Unknown, InvalidArgument, DeadlineExceeded, NotFound, AlreadyExists, PermissionDenied,
    ResourceExhausted, FailedPrecondition, Aborted, OutOfRange, Unimplemented, Internal, Unavailable,
    DataLoss, Unauthenticated)}

# The Connect protocol's mapping of HTTP statuses for errors without a Connect body (a proxy's answer).
_BY_HTTP = {400: "internal", 401: "unauthenticated", 403: "permission_denied", 404: "unimplemented",
            429: "unavailable", 502: "unavailable", 503: "unavailable", 504: "unavailable"}


def from_code(code: str, message: str) -> JqError:
    """The exception for a Connect error code."""
    cls = _BY_CODE.get(code, Unknown)
    return cls(message, code if cls is Unknown else None)


def from_http_status(status: int, message: str) -> JqError:
    return from_code(_BY_HTTP.get(status, "unknown"), message)


class JobFailed(Exception):
    """Raised by :meth:`Client.wait_result` when a job ended without success (DEAD_LETTERED)."""

    def __init__(self, job):
        super().__init__(f"job {job.id} ended {job.state}: {job.failure_reason or 'error'}: {job.last_error}")
        self.job = job


# --- raised by handlers --------------------------------------------------------------------------

class PermanentError(Exception):
    """A handler raises it when no other attempt can succeed: the job is dead-lettered at once."""


class RetryAfter(Exception):
    """A handler raises it to fail the attempt and ask that the next one waits at least ``seconds``
    (an HTTP 429/503's Retry-After); the queue's backoff still applies when longer."""

    def __init__(self, seconds: float, message: str = ""):
        super().__init__(message or f"retry after {seconds:g}s")
        self.seconds = float(seconds)


class JobCancelled(Exception):
    """Raised by :meth:`JobContext.raise_if_cancelled` once the job's context is cancelled: by the
    server (CancelJob), by its timeout, by a lost lease or by a shutdown. ``cause`` says which."""

    def __init__(self, cause: str):
        super().__init__(cause)
        self.cause = cause
