"""The jq client: submit jobs, follow them, cancel them, read their results."""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Iterator

from . import errors
from ._wire import Transport, bytes_field, duration
from .types import Job, JobEvent, Result, Submitted

JOBS = "/jq.v1.JobService/"


@dataclass
class CancelResult:
    """CancelJob's answer: the job after the cancellation. ``cancel_requested`` is True for a RUNNING job,
    whose worker is asked to stop it (cooperative); the job then ends DEAD_LETTERED or, if the handler
    finished first, DONE."""

    job: Job
    cancel_requested: bool


def job_spec(queue: str, type: str, payload: Any = None, *, priority: int | None = None,
             max_retries: int | None = None, timeout: float | None = None, ttl: float | None = None,
             run_at: datetime | None = None, idempotency_key: str | None = None, labels: dict | None = None,
             keep_result: bool = False) -> dict:
    """A JobSpec message. ``payload`` may be bytes, str (its UTF-8), or a JSON value (dict, list, number,
    bool), which is stored as its JSON text. Durations are seconds."""
    spec: dict[str, Any] = {"queue": queue, "type": type}
    if payload is not None:
        spec["payload"] = bytes_field(payload)
    if priority is not None:
        spec["priority"] = priority
    if max_retries is not None:
        spec["maxRetries"] = max_retries
    if timeout is not None:
        spec["timeout"] = duration(timeout)
    if ttl is not None:
        spec["ttl"] = duration(ttl)
    if run_at is not None:
        if run_at.tzinfo is None:
            raise ValueError("run_at must be timezone-aware")
        spec["runAt"] = run_at.astimezone(timezone.utc).isoformat().replace("+00:00", "Z")
    if idempotency_key:
        spec["idempotencyKey"] = idempotency_key
    if labels:
        spec["labels"] = labels
    if keep_result:
        spec["keepResult"] = True
    return spec


class Client:
    """A client of one jq server. Thread-safe; reuses its HTTP connections.

    ``Client("localhost:50051", token=os.environ.get("JQ_TOKEN"))``; for TLS pass
    ``ssl_context=jqsdk.tls_context(ca_file=..., cert_file=..., key_file=...)`` (the last two for mTLS).
    Every method raises a :class:`jqsdk.JqError` subclass with the server's code and message.
    """

    def __init__(self, addr: str = "localhost:50051", *, token: str | None = None, ssl_context=None,
                 timeout: float = 10.0, transport: Transport | None = None):
        self.transport = transport or Transport(addr, token=token, ssl_context=ssl_context, timeout=timeout)

    def close(self) -> None:
        self.transport.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _call(self, method: str, msg: dict, timeout: float | None = None) -> dict:
        return self.transport.unary(JOBS + method, msg, timeout)

    def submit(self, queue: str, type: str, payload: Any = None, **opts) -> str:
        """Submit one job; returns its id (the earlier job's with a matching ``idempotency_key``).
        Options as :func:`job_spec`."""
        return self._call("SubmitJob", {"job": job_spec(queue, type, payload, **opts)})["jobId"]

    def submit_many(self, specs: list[dict]) -> list[Submitted]:
        """Submit 1 to 1000 jobs (specs from :func:`job_spec`) atomically: all or none."""
        out = self._call("SubmitJobs", {"jobs": specs})
        return [Submitted(r["jobId"], r.get("existing", False)) for r in out.get("results", [])]

    def get(self, job_id: str) -> Job:
        return Job.from_msg(self._call("GetJob", {"jobId": job_id})["job"])

    def events(self, job_id: str) -> list[JobEvent]:
        """The job's recorded state transitions, oldest first."""
        return [JobEvent.from_msg(e) for e in self._call("ListJobEvents", {"jobId": job_id}).get("events", [])]

    def cancel(self, job_id: str) -> CancelResult:
        out = self._call("CancelJob", {"jobId": job_id})
        return CancelResult(Job.from_msg(out["job"]), out.get("cancelRequested", False))

    def retry(self, job_id: str) -> Job:
        """Send a FAILED or DEAD_LETTERED job back to PENDING with its retry counter reset."""
        return Job.from_msg(self._call("RetryJob", {"jobId": job_id})["job"])

    def result(self, job_id: str, consume: bool = False) -> Result:
        """The job's result; with ``consume`` a success's bytes are deleted as they are returned."""
        return Result.from_msg(self._call("GetJobResult", {"jobId": job_id, "consume": consume}))

    def watch(self, job_id: str, timeout: float | None = None) -> Iterator[Job]:
        """The job now and after each change of state or attempt, until it is DONE or DEAD_LETTERED.
        ``timeout`` bounds the silence between two versions (DeadlineExceeded)."""
        stream = self.transport.stream(JOBS + "WatchJob", {"jobId": job_id}, timeout)
        try:
            for m in stream:
                yield Job.from_msg(m["job"])
        finally:
            stream.close()

    def wait(self, job_id: str, timeout: float | None = None) -> Job:
        """Wait until the job is DONE or DEAD_LETTERED and return it. Reconnects when a server replica goes
        away; raises DeadlineExceeded after ``timeout`` seconds."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                raise errors.DeadlineExceeded(f"job {job_id} not finished within {timeout:g}s")
            try:
                last = None
                for job in self.watch(job_id, timeout=left):
                    last = job
                if last is not None and last.done:
                    return last
            except errors.Unavailable:
                time.sleep(0.2)  # the replica is going away: watch again

    def create_queue(self, name: str, *, max_retries: int | None = None, backoff_base: float | None = None,
                     backoff_max: float | None = None, result_retention: float | None = None) -> dict:
        """Create a queue (admin); durations in seconds. Returns the Queue message."""
        msg: dict[str, Any] = {"name": name}
        if max_retries is not None:
            msg["maxRetries"] = max_retries
        for k, v in (("backoffBase", backoff_base), ("backoffMax", backoff_max), ("resultRetention", result_retention)):
            if v is not None:
                msg[k] = duration(v)
        return self.transport.unary("/jq.v1.QueueService/CreateQueue", msg)["queue"]

    def wait_result(self, job_id: str, timeout: float | None = None) -> bytes:
        """Wait for the job and return its result bytes (submit it with ``keep_result=True``); raises
        :class:`jqsdk.JobFailed` when it was dead-lettered."""
        job = self.wait(job_id, timeout)
        if job.state != "DONE":
            raise errors.JobFailed(job)
        return self.result(job_id).data
