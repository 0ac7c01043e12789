"""Typed views of jq's messages. Each keeps the message it was made from in ``raw``."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from ._wire import bytes_value, parse_duration

# Job states, as the API names them without the JOB_STATE_ prefix.
PENDING, ASSIGNED, RUNNING, DONE, FAILED, DEAD_LETTERED = (
    "PENDING", "ASSIGNED", "RUNNING", "DONE", "FAILED", "DEAD_LETTERED")
TERMINAL = frozenset((DONE, DEAD_LETTERED))


def _state(v: str | None) -> str:
    return (v or "JOB_STATE_UNSPECIFIED").removeprefix("JOB_STATE_")


def _time(v: str | None) -> datetime | None:
    if not v:
        return None
    # Python 3.11's fromisoformat takes at most 6 fractional digits.
    if "." in v:
        head, frac = v.split(".", 1)
        digits = "".join(c for c in frac if c.isdigit())
        v = head + "." + digits[:6].ljust(6, "0") + frac[len(digits):]
    return datetime.fromisoformat(v.replace("Z", "+00:00"))


@dataclass
class Progress:
    percent: int
    message: str


@dataclass
class Job:
    """A job as GetJob returns it."""

    id: str
    queue: str
    type: str
    state: str
    payload: bytes
    priority: int = 0
    attempt: int = 0
    max_retries: int = 0
    retry_count: int = 0
    timeout: float | None = None
    labels: dict = field(default_factory=dict)
    worker_id: str = ""
    last_error: str = ""
    failure_reason: str = ""
    created_at: datetime | None = None
    started_at: datetime | None = None
    completed_at: datetime | None = None
    progress: Progress | None = None
    waiting: str = ""
    raw: dict = field(default_factory=dict, repr=False)

    @property
    def done(self) -> bool:
        """Whether the job reached a final state (DONE or DEAD_LETTERED)."""
        return self.state in TERMINAL

    def json(self) -> Any:
        """The payload parsed as JSON."""
        return json.loads(self.payload)

    @classmethod
    def from_msg(cls, m: dict) -> "Job":
        p = m.get("progress")
        return cls(
            id=m.get("id", ""), queue=m.get("queue", ""), type=m.get("type", ""), state=_state(m.get("state")),
            payload=bytes_value(m.get("payload")), priority=m.get("priority", 0), attempt=m.get("attempt", 0),
            max_retries=m.get("maxRetries", 0), retry_count=m.get("retryCount", 0),
            timeout=parse_duration(m.get("timeout")), labels=m.get("labels", {}), worker_id=m.get("workerId", ""),
            last_error=m.get("lastError", ""), failure_reason=m.get("failureReason", ""),
            created_at=_time(m.get("createdAt")), started_at=_time(m.get("startedAt")),
            completed_at=_time(m.get("completedAt")),
            progress=Progress(p.get("percent", 0), p.get("message", "")) if p else None,
            waiting=m.get("waiting", ""), raw=m)


@dataclass
class Result:
    """A job's result (GetJobResult). ``found`` is False while the job has not finished, or when its
    success bytes were not kept (keep_result false), already consumed, or past retention."""

    found: bool
    state: str
    success: bool = False
    data: bytes = b""
    checksum_sha256: str = ""
    reason: str = ""
    message: str = ""
    should_retry: bool = False
    error: Any = None
    raw: dict = field(default_factory=dict, repr=False)

    def json(self) -> Any:
        return json.loads(self.data)

    @classmethod
    def from_msg(cls, m: dict) -> "Result":
        r = m.get("result") or {}
        return cls(found=m.get("found", False), state=_state(m.get("state")), success=r.get("type") == "success",
                   data=bytes_value(r.get("data")), checksum_sha256=r.get("checksumSha256", ""),
                   reason=r.get("reason", ""), message=r.get("message", ""), should_retry=r.get("shouldRetry", False),
                   error=r.get("error"), raw=m)


@dataclass
class JobEvent:
    """One recorded state transition of a job (the job's log)."""

    job_id: str
    seq: int
    from_state: str
    to_state: str
    reason: str
    worker_id: str
    attempt: int
    timestamp: datetime | None
    raw: dict = field(default_factory=dict, repr=False)

    @classmethod
    def from_msg(cls, m: dict) -> "JobEvent":
        return cls(job_id=m.get("jobId", ""), seq=int(m.get("seq", 0)), from_state=_state(m.get("fromState")),
                   to_state=_state(m.get("toState")), reason=m.get("reason", ""), worker_id=m.get("workerId", ""),
                   attempt=m.get("attempt", 0), timestamp=_time(m.get("timestamp")), raw=m)


@dataclass
class Submitted:
    """SubmitJob's answer: the job id, and whether an idempotency key matched an earlier job."""

    job_id: str
    existing: bool = False
