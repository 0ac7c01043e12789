"""The jq worker runtime: WorkerService spoken as the Go executor (queue/executor) speaks it.

Threads, not asyncio: handlers are ordinary blocking functions (an HTTP call with urllib, an image
library, a database driver), the standard library has no asyncio HTTP client, and the protocol's own
work is a handful of threads (session, heartbeat, ack, report, progress, timers) blocked on sockets,
which release the GIL. A handler runs on one of ``concurrency`` pool threads and sees cancellation
through its :class:`JobContext` (cooperative: Python cannot stop a thread).

A lease's life: the assignment arrives on the stream (the server committed PENDING -> ASSIGNED); its
handler starts at once when a slot is free (else it waits, with ``prefetch``); a handler still running
after ``ack_delay`` is acknowledged (AckJobs), a shorter one is acknowledged by its report; the outcome
is reported (ReportJobs) in batches. A refused ack or a lost registration cancels the handler, whose
outcome is then not reported. Heartbeats carry every held lease; their answer cancels jobs and carries
the operator's DRAIN and SHUTDOWN. A worker whose lease went unrenewed for 3/4 of the server's heartbeat
timeout cancels its jobs itself (self-fencing) before the server can hand them to another worker.
"""

from __future__ import annotations

import collections
import logging
import os
import queue as _queue
import signal
import socket
import threading
import time
import uuid
from dataclasses import dataclass
from typing import Any, Callable

from . import errors
from ._batch import Batcher, Timers, backoff
from ._wire import Transport, bytes_field, dumps, duration, parse_duration
from .types import Job, _time

WORKERS = "/jq.v1.WorkerService/"
log = logging.getLogger("jqsdk.worker")

# Causes with which a job's context is cancelled (JobContext.cause).
CANCELLED = "cancelled"  # CancelJob, or a lease the server no longer honours
TIMEOUT = "timeout"  # the job's timeout
LEASE_LOST = "lease_lost"  # ack refused, worker declared offline, newer attempt: not reported
LEASE_EXPIRED = "lease_expired"  # self-fenced: the lease could not be renewed in time
SHUTDOWN = "shutdown"  # the stop's grace period ended: left to the server's reaper

FENCE_FRACTION = 0.75
DEFAULT_JOB_TIMEOUT = 30.0
MAX_ERROR_BYTES = 4 << 10

_QUEUED, _RUNNING, _REPORTING, _DONE = range(4)


class JobContext:
    """What a handler gets: the job, its payload, cancellation and progress."""

    def __init__(self, worker: "Worker", job: Job, attempt: int, timeout: float):
        self.job, self.attempt, self.timeout = job, attempt, timeout
        self._worker = worker
        self._cancelled = threading.Event()
        self.cause: str | None = None
        self.started = 0.0  # monotonic; 0 until the handler starts
        self.deadline = 0.0

    @property
    def payload(self) -> bytes:
        return self.job.payload

    def json(self) -> Any:
        """The payload parsed as JSON."""
        return self.job.json()

    @property
    def cancelled(self) -> bool:
        return self._cancelled.is_set()

    def wait(self, seconds: float) -> bool:
        """Sleep up to ``seconds``; True when the job was cancelled meanwhile (stop working then)."""
        return self._cancelled.wait(seconds)

    def raise_if_cancelled(self) -> None:
        """Raise :class:`jqsdk.JobCancelled` once the job is cancelled (server, timeout, shutdown, fence)."""
        if self._cancelled.is_set():
            raise errors.JobCancelled(self.cause or CANCELLED)

    def remaining(self) -> float:
        """Seconds left before the job's timeout."""
        return max(self.deadline - time.monotonic(), 0.0) if self.deadline else self.timeout

    def progress(self, percent: int, message: str = "") -> None:
        """Record how far the attempt got (0..100, a short message); sent at most once a second, latest first."""
        self._worker._progress(self, int(min(max(percent, 0), 100)), message[:256])

    def _cancel(self, cause: str) -> None:
        if self.cause is None:
            self.cause = cause
        self._cancelled.set()


class _Task:
    __slots__ = ("ctx", "job_id", "attempt", "state", "abandoned", "ack_queued", "ack_by", "fenced",
                 "progress", "progress_next", "redelivered")

    def __init__(self, ctx: JobContext, ack_by: float):
        self.ctx, self.job_id, self.attempt = ctx, ctx.job.id, ctx.attempt
        self.state, self.abandoned, self.ack_queued, self.fenced = _QUEUED, False, False, False
        self.ack_by = ack_by
        self.progress: tuple[int, str] | None = None
        self.progress_next = 0.0
        self.redelivered = False

    def lease(self) -> dict:
        return {"jobId": self.job_id, "attempt": self.attempt}

    def started_ago(self) -> str | None:
        s = self.ctx.started
        return duration(max(time.monotonic() - s, 0.0)) if s else None


@dataclass
class JobDone:
    """Passed to ``on_job_done`` after each handler returns."""

    job: Job
    attempt: int
    outcome: str  # "succeeded", "failed" (reason says why) or "abandoned" (not reported)
    reason: str
    error: BaseException | None
    runtime: float


def default_worker_id() -> str:
    """<hostname>-<pid>-<8 random hex digits>: unguessable, so no other principal can take the id first."""
    return f"{socket.gethostname() or 'worker'}-{os.getpid()}-{uuid.uuid4().hex[:8]}"


class Worker:
    """Runs the handlers of ``handlers`` (job type -> function) for jobs of ``queues``.

    A handler takes a :class:`JobContext` and returns the result: bytes, str (its UTF-8), None (empty)
    or a JSON value. It fails the attempt by raising: :class:`jqsdk.PermanentError` dead-letters the job
    at once, :class:`jqsdk.RetryAfter` asks for a delay before the next attempt, anything else is an
    ordinary retryable failure. The worker registers only the types it has handlers for.
    """

    def __init__(self, addr: str = "localhost:50051", *, queues: list[str], handlers: dict[str, Callable[[JobContext], Any]],
                 concurrency: int = 4, prefetch: int = 0, worker_id: str | None = None, labels: dict | None = None,
                 version: str = "", token: str | None = None, ssl_context=None, transport: Transport | None = None,
                 shutdown_grace: float = 60.0, flush_timeout: float = 5.0, report_timeout: float = 300.0,
                 call_timeout: float = 10.0, ack_delay: float = 1.0, heartbeat_interval: float = 5.0,
                 min_backoff: float = 0.1, max_backoff: float = 2.0, max_result_bytes: int = 256 << 10,
                 on_job_done: Callable[[JobDone], None] | None = None):
        if not queues:
            raise ValueError("at least one queue is required")
        if not handlers:
            raise ValueError("at least one handler is required")
        if not 1 <= concurrency <= 1024:
            raise ValueError(f"concurrency must be 1 to 1024, got {concurrency}")
        self._own_transport = transport is None
        self.transport = transport or Transport(addr, token=token, ssl_context=ssl_context, timeout=call_timeout)
        self.queues, self.handlers = list(queues), dict(handlers)
        self.concurrency, self.prefetch = concurrency, min(max(prefetch, 0), concurrency)
        self.worker_id = worker_id or default_worker_id()
        self.labels, self.version = labels or {}, version
        self.shutdown_grace, self.flush_timeout, self.report_timeout = shutdown_grace, flush_timeout, report_timeout
        self.call_timeout, self.ack_delay = call_timeout, ack_delay
        self.min_backoff, self.max_backoff = min_backoff, max(max_backoff, min_backoff)
        self.max_result_bytes = max_result_bytes
        self.on_job_done = on_job_done

        self._mu = threading.Lock()
        self._tasks: dict[str, _Task] = {}
        self._queued: collections.deque[_Task] = collections.deque()
        self._running = 0
        self._active = 0  # queued or running
        self._idle = threading.Condition(self._mu)  # _active reached 0, or a lease was released
        self._hb_interval, self._hb_timeout = heartbeat_interval, 0.0
        self._renewed_at = 0.0
        self._registered = False
        self._ever_registered = False
        self._draining = threading.Event()
        self._stopping = threading.Event()
        self._stop_req = threading.Event()
        self._hb_now = threading.Event()
        self._stream = None
        self._runq: _queue.SimpleQueue = _queue.SimpleQueue()
        self._progress_cv = threading.Condition()
        self._progress_due: dict[str, _Task] = {}
        self.fatal: BaseException | None = None
        self.stats = collections.Counter()
        self._stats_mu = threading.Lock()

    # --- public ----------------------------------------------------------------------------------

    def stop(self) -> None:
        """Ask :meth:`run` to stop (two phases: no new work, then running jobs get the grace period)."""
        self._stop_req.set()

    def run(self) -> None:
        """Register (retrying until the server answers), take and run jobs until :meth:`stop` or the
        operator's SHUTDOWN, then stop in two phases and deregister. Raises only when the server refuses
        the registration (invalid, unauthenticated, not allowed)."""
        self._timers = Timers("jq-timers")
        self._acks = Batcher("ack", self._send_acks, self._ack_done, self.min_backoff, self.max_backoff)
        self._reports = Batcher("report", self._send_reports, self._report_done, self.min_backoff, self.max_backoff)
        for i in range(self.concurrency):
            threading.Thread(target=self._pool, name=f"jq-job-{i}", daemon=True).start()
        loops = [threading.Thread(target=f, name=n, daemon=True) for f, n in (
            (self._session_loop, "jq-session"), (self._heartbeat_loop, "jq-heartbeat"), (self._progress_loop, "jq-progress"))]
        for t in loops:
            t.start()
        log.info("worker starting", extra={"worker_id": self.worker_id, "concurrency": self.concurrency})
        self._stop_req.wait()
        self._stop()
        self._timers.stop()
        self._acks.stop()
        self._reports.stop()
        with self._progress_cv:
            self._progress_cv.notify_all()
        for _ in range(self.concurrency):
            self._runq.put(None)
        if self._own_transport:
            self.transport.close()
        log.info("worker stopped", extra={"worker_id": self.worker_id, "stats": dict(self.stats)})
        if self.fatal is not None:
            raise self.fatal

    def run_until_signal(self) -> None:
        """:meth:`run` with SIGTERM and SIGINT starting the stop; for a worker program's main thread."""
        for s in (signal.SIGTERM, signal.SIGINT):
            signal.signal(s, lambda *_: self.stop())
        t = threading.Thread(target=self.run, name="jq-worker")
        t.start()
        while t.is_alive():
            t.join(0.2)  # the main thread stays free to run the signal handlers
        if self.fatal is not None:
            raise self.fatal

    def _count(self, key: str, n: int = 1) -> None:
        with self._stats_mu:  # += on a Counter from several threads can lose updates
            self.stats[key] += n

    def held(self) -> int:
        with self._mu:
            return len(self._tasks)

    # --- session: register and stream --------------------------------------------------------------

    def _call(self, method: str, msg: dict, timeout: float | None = None) -> dict:
        return self.transport.unary(WORKERS + method, msg, timeout or self.call_timeout)

    def _register(self) -> None:
        sent = time.monotonic()
        reg = self._call("RegisterWorker", {
            "workerId": self.worker_id, "hostname": socket.gethostname(), "concurrency": self.concurrency,
            "queues": self.queues, "version": self.version, "labels": self.labels, "types": sorted(self.handlers)})
        with self._mu:
            self._hb_interval = parse_duration(reg.get("heartbeatInterval")) or self._hb_interval
            self._hb_timeout = parse_duration(reg.get("heartbeatTimeout")) or self._hb_timeout
            self._renewed_at = max(self._renewed_at, sent)
            held = len(self._tasks)
        self._registered = self._ever_registered = True
        self._hb_now.set()
        log.info("worker registered", extra={"worker_id": self.worker_id, "held_leases": held})

    def _cap_backoff(self, d: float) -> float:
        # A pause longer than the heartbeat timeout would have the worker declared lost.
        return min(d, max(self._hb_timeout / 4, 0.1)) if self._hb_timeout else d

    def _session_loop(self) -> None:
        failures = 0
        while not self._stopping.is_set():
            if self._draining.is_set():
                self._stopping.wait()
                return
            if not self._registered:
                try:
                    self._register()
                    failures = 0
                except (errors.InvalidArgument, errors.Unauthenticated, errors.PermissionDenied) as e:
                    log.error("worker cannot register", extra={"error": str(e)})
                    self.fatal = e
                    self._stop_req.set()
                    return
                except errors.JqError as e:
                    failures += 1
                    log.debug("cannot register with the server; retrying", extra={"error": str(e)})
                    self._stopping.wait(self._cap_backoff(backoff(failures, self.min_backoff, self.max_backoff)))
                    continue
            err = self._consume()
            if self._stopping.is_set():
                return
            if isinstance(err, (errors.FailedPrecondition, type(None))):
                self._hb_now.set()  # draining, or declared offline: the next heartbeat says which
            elif not isinstance(err, errors.Canceled):
                self._registered = False  # server restart, cut, ABORTED by a newer stream: register again
            if isinstance(err, errors.Canceled):
                continue  # closed by the worker itself (drain, re-registration)
            failures += 1
            d = self._cap_backoff(backoff(failures, self.min_backoff, self.max_backoff))
            log.warning("assignment stream ended; reconnecting", extra={"error": str(err), "backoff": d})
            self._stopping.wait(d)

    def _consume(self) -> Exception | None:
        with self._mu:
            while True:
                free = self.concurrency + self.prefetch - len(self._tasks)
                if free > 0 or self._stopping.is_set():
                    break
                self._idle.wait(0.5)  # a lease is released when its report is judged
        if self._stopping.is_set():
            return errors.Canceled("stopping")
        try:
            st = self.transport.stream(WORKERS + "StreamJobs", {
                "workerId": self.worker_id, "capacity": free, "prefetch": self.prefetch})
        except errors.JqError as e:
            return e
        with self._mu:
            self._stream = st
        if self._stopping.is_set() or self._draining.is_set() or not self._registered:
            st.close()
        try:
            for m in st:
                a = m.get("assignment")
                if a:
                    self._accept(a)
            return None
        except errors.JqError as e:
            return e
        finally:
            with self._mu:
                if self._stream is st:
                    self._stream = None
            st.close()

    def _reset_stream(self) -> None:
        with self._mu:
            st = self._stream
        if st is not None:
            st.close()

    def _reregister(self) -> None:
        self._registered = False
        self._reset_stream()

    # --- assignments and handlers -------------------------------------------------------------------

    def _accept(self, a: dict) -> None:
        self._count("received", 1)
        job = Job.from_msg(a.get("job") or {})
        if not job.id:
            log.error("assignment without a job id ignored")
            return
        attempt = int(a.get("attempt", job.attempt))
        job.attempt = attempt
        timeout = job.timeout if job.timeout and job.timeout > 0 else DEFAULT_JOB_TIMEOUT
        # The ack deadline is on the server's clock: only its distance from now matters, and a deadline
        # that looks past (late delivery, skew) bounds the ack's retries, never the ack itself.
        ack_window = 5.0
        if a.get("deadline"):
            d = _time(a["deadline"])
            left = d.timestamp() - time.time() if d else 0
            ack_window = left if left > 1 else 5.0
        t = _Task(JobContext(self, job, attempt, timeout), time.monotonic() + ack_window)
        with self._mu:
            old = self._tasks.get(job.id)
            if old is not None:
                if old.attempt == attempt:
                    return  # a duplicate assignment
                self._abandon_locked(old, LEASE_LOST)  # the server moved the job to a newer attempt
            self._tasks[job.id] = t
            if self._running < self.concurrency:
                self._active += 1
                self._start_locked(t)
            elif len(self._queued) < self.prefetch:
                self._active += 1
                self._queued.append(t)
                self._timers.at(time.monotonic() + ack_window / 2, lambda: self._lazy_ack(t))
            else:
                # More than concurrency plus prefetch: a protocol error. Report it failed, never run it.
                t.state = _REPORTING
                self._count("protocol_errors", 1)
                self._queue_report(t, {"failure": {"error": f"worker {self.worker_id} received an assignment "
                                                   f"beyond its concurrency of {self.concurrency}", "reason": "error"}})

    def _start_locked(self, t: _Task) -> None:
        t.state = _RUNNING
        self._running += 1
        if not t.ack_queued:
            delay = self.ack_delay if self.ack_delay >= 0 else 0
            delay = min(delay, max(t.ack_by - time.monotonic(), 0) / 2)
            self._timers.at(time.monotonic() + delay, lambda: self._lazy_ack(t))
        self._runq.put(t)

    def _pool(self) -> None:
        while True:
            t = self._runq.get()
            if t is None:
                return
            self._execute(t)

    def _execute(self, t: _Task) -> None:
        ctx = t.ctx
        self._count("started", 1)
        ctx.started = time.monotonic()
        ctx.deadline = ctx.started + ctx.timeout
        self._timers.at(ctx.deadline, lambda: ctx._cancel(TIMEOUT))
        handler = self.handlers.get(ctx.job.type)
        res, err = None, None
        try:
            if handler is None:
                raise errors.PermanentError(f"no handler for job type {ctx.job.type!r}")
            if ctx.cancelled:
                ctx.raise_if_cancelled()
            res = handler(ctx)
        except BaseException as e:  # noqa: BLE001 - every handler failure is the job's outcome
            err = e
        runtime = time.monotonic() - ctx.started
        outcome, rep = self._outcome(t, res, err, runtime)
        with self._mu:
            self._running -= 1
            report = not t.abandoned and outcome != "abandoned"
            if not report:
                outcome = "abandoned"
                self._release_locked(t)
            else:
                t.state = _REPORTING
                self._active -= 1
                self._start_queued_locked()
                self._idle.notify_all()
        self._count(outcome, 1)
        if report:
            rep["startedAgo"] = None
            self._queue_report(t, rep)
        if self.on_job_done:
            f = rep.get("failure") or {}
            self.on_job_done(JobDone(ctx.job, t.attempt, outcome, f.get("reason", ""), err, runtime))

    def _outcome(self, t: _Task, res: Any, err: BaseException | None, runtime: float) -> tuple[str, dict]:
        cause, rt = t.ctx.cause, duration(runtime)

        def fail(reason: str, msg: str, permanent: bool = False, retry_after: float | None = None):
            f = {"error": _truncate(msg), "reason": reason, "runtime": rt}
            if permanent:
                f["permanent"] = True
            if retry_after and not permanent:
                f["retryAfter"] = duration(retry_after)
            return "failed", {"failure": f}

        if cause == LEASE_LOST or (err is not None and cause == SHUTDOWN):
            return "abandoned", {}
        if err is None:
            data = _result_bytes(res)
            if len(data) > self.max_result_bytes:
                return fail("output_too_large", f"result of {len(data)} bytes exceeds the limit of "
                            f"{self.max_result_bytes} bytes", True)
            return "succeeded", {"success": {"result": bytes_field(data), "runtime": rt}}
        if cause == CANCELLED:
            return fail("cancelled", f"cancelled: {err}", True)
        if cause == LEASE_EXPIRED:
            if self._stopping.is_set():
                return "abandoned", {}
            return fail("lease_expired", "lease not renewed in time: the worker stopped the job before the "
                        "server could hand it to another worker")
        if cause == TIMEOUT:
            return fail("timeout", f"job exceeded its timeout of {t.ctx.timeout:g}s: {err}")
        if isinstance(err, errors.PermanentError):
            return fail("error", str(err) or type(err).__name__, True)
        if isinstance(err, errors.RetryAfter):
            return fail("error", str(err), False, err.seconds)
        return fail("error", f"{type(err).__name__}: {err}" if str(err) else type(err).__name__)

    def _start_queued_locked(self) -> None:
        while self._queued and self._running < self.concurrency:
            t = self._queued.popleft()
            if t.state == _QUEUED:
                self._start_locked(t)

    def _release_locked(self, t: _Task) -> None:
        if t.state == _DONE:
            return
        if t.state == _RUNNING:
            self._active -= 1
            self._start_queued_locked()
        elif t.state == _QUEUED:
            self._active -= 1
            try:
                self._queued.remove(t)
            except ValueError:
                pass
        t.state = _DONE
        if self._tasks.get(t.job_id) is t:
            del self._tasks[t.job_id]
        self._idle.notify_all()

    def _abandon_locked(self, t: _Task, cause: str) -> None:
        t.abandoned = True
        if t.state == _QUEUED:
            self._release_locked(t)
            self._count("abandoned", 1)
        elif t.state == _RUNNING:
            t.ctx._cancel(cause)
        if self._tasks.get(t.job_id) is t:
            del self._tasks[t.job_id]
            self._idle.notify_all()

    # --- acks and reports ----------------------------------------------------------------------------

    def _lazy_ack(self, t: _Task) -> None:
        with self._mu:
            if t.state not in (_RUNNING, _QUEUED) or t.ack_queued or t.abandoned:
                return
            t.ack_queued = True
        self._acks.add(t, t.ack_by)

    def _send_acks(self, ts: list[_Task]) -> list[dict]:
        leases = []
        for t in ts:
            lease = t.lease()
            ago = t.started_ago()
            if ago:
                lease["startedAgo"] = ago
            leases.append(lease)
        try:
            return self._call("AckJobs", {"workerId": self.worker_id, "leases": leases}).get("results", [])
        except errors.JqError as e:
            self._note_call_error(e)
            raise

    def _ack_done(self, t: _Task, res: dict | None, err: Exception | None) -> None:
        with self._mu:
            if t.state not in (_RUNNING, _QUEUED) or (err is None and res and res.get("ok")):
                return
            self._count("acks_rejected", 1)
            log.info("start not acknowledged by the server; stopping the job",
                     extra={"job_id": t.job_id, "reason": (res or {}).get("error") or str(err)})
            self._abandon_locked(t, LEASE_LOST)

    def _queue_report(self, t: _Task, rep: dict) -> None:
        rep.update(t.lease())
        self._reports.add((t, rep), time.monotonic() + self.report_timeout)

    def _send_reports(self, items: list) -> list[dict]:
        reps = []
        for t, rep in items:
            r = dict(rep)
            ago = t.started_ago()
            if ago:
                r["startedAgo"] = ago
            else:
                r.pop("startedAgo", None)
            reps.append(r)
        try:
            return self._call("ReportJobs", {"workerId": self.worker_id, "reports": reps}).get("results", [])
        except errors.JqError as e:
            self._note_call_error(e)
            for t, _ in items:
                t.redelivered = True
            raise

    def _report_done(self, item, res: dict | None, err: Exception | None) -> None:
        t, rep = item
        with self._mu:
            self._release_locked(t)
        if err is not None:
            self._count("reports_lost", 1)
            log.error("report not delivered; the server's reaper will settle the job",
                      extra={"job_id": t.job_id, "error": str(err)})
        elif not res.get("ok"):
            self._count("reports_settled" if t.redelivered else "reports_rejected", 1)
            log.info("report rejected by the server; dropping it", extra={"job_id": t.job_id, "reason": res.get("error")})

    def _note_call_error(self, e: Exception) -> None:
        if isinstance(e, errors.NotFound):
            self._reregister()
        elif isinstance(e, errors.FailedPrecondition):
            self._hb_now.set()

    # --- heartbeats, commands and self-fencing ------------------------------------------------------

    def _heartbeat_loop(self) -> None:
        next_hb = time.monotonic()
        unreachable = 0
        while not self._hb_stopped():
            now = time.monotonic()
            wait = min(next_hb - now, self._check_fence(now))
            if wait > 0 and self._hb_now.wait(wait):
                pass
            if self._hb_stopped():
                return
            now = time.monotonic()
            if self._hb_now.is_set() or now >= next_hb:
                self._hb_now.clear()
                if self._registered:
                    unreachable = self._heartbeat(unreachable)
                with self._mu:
                    next_hb = time.monotonic() + self._hb_interval

    def _hb_stopped(self) -> bool:
        return getattr(self, "_hb_done", False)

    def _heartbeat(self, unreachable: int) -> int:
        with self._mu:
            held = {t.job_id: t.attempt for t in self._tasks.values()}
            timeout = min(self.call_timeout, max(self._hb_interval, 1.0))
        sent = time.monotonic()
        try:
            reply = self._call("Heartbeat", {"workerId": self.worker_id,
                                             "running": [{"jobId": j, "attempt": a} for j, a in held.items()]}, timeout)
        except errors.FailedPrecondition as e:
            log.warning("server declared this worker offline; stopping its jobs and registering again", extra={"error": str(e)})
            with self._mu:
                for t in list(self._tasks.values()):
                    if t.state in (_RUNNING, _QUEUED):
                        self._abandon_locked(t, LEASE_LOST)
            self._reregister()
            return 0
        except errors.NotFound:
            self._reregister()
            return 0
        except errors.JqError as e:
            unreachable += 1
            log.warning("heartbeat failed", extra={"consecutive": unreachable, "error": str(e)})
            if isinstance(e, (errors.Unavailable, errors.DeadlineExceeded)) and unreachable >= 2:
                self._reset_stream()  # the stream may be silently dead on a half-open connection
            return unreachable
        with self._mu:
            self._renewed_at = max(self._renewed_at, sent)
            for job_id in reply.get("cancelJobIds", []):
                t = self._tasks.get(job_id)
                if t is None or held.get(job_id) != t.attempt:
                    continue  # not held, or a newer attempt arrived after the heartbeat listed the old one
                if t.state in (_QUEUED, _RUNNING):
                    t.ctx._cancel(CANCELLED)
        cmd = reply.get("command", "")
        if cmd in ("WORKER_COMMAND_DRAIN", "WORKER_COMMAND_SHUTDOWN") and not self._draining.is_set():
            log.info("worker draining: taking no new jobs", extra={"command": cmd})
            self._draining.set()
            self._reset_stream()
        if cmd == "WORKER_COMMAND_SHUTDOWN":
            self._stop_req.set()
        return 0

    def _check_fence(self, now: float) -> float:
        """Cancel every held job once the lease went unrenewed past FENCE_FRACTION of the server's heartbeat
        timeout (counted from when the last successful renewal was sent); the wait until the next check."""
        with self._mu:
            if not self._hb_timeout or not self._renewed_at:
                return 1.0
            after = self._hb_timeout * FENCE_FRACTION
            since = now - self._renewed_at
            if since < after:
                return after - since
            n = 0
            for t in self._tasks.values():
                if t.fenced or t.state not in (_QUEUED, _RUNNING):
                    continue
                t.fenced = True
                t.ctx._cancel(LEASE_EXPIRED)
                n += 1
            if n:
                self._count("fenced", n)
                log.warning("lease not renewed in time; cancelling the running jobs before the server reassigns them",
                            extra={"jobs": n, "since_renewal": since})
            return min(max(self._hb_interval, 0.1), 1.0)

    # --- progress ----------------------------------------------------------------------------------

    def _progress(self, ctx: JobContext, percent: int, message: str) -> None:
        with self._mu:
            t = self._tasks.get(ctx.job.id)
            if t is None or t.ctx is not ctx:
                return
            t.progress = (percent, message)
        with self._progress_cv:
            self._progress_due[t.job_id] = t
            self._progress_cv.notify()

    def _progress_loop(self) -> None:
        while not self._stopping.is_set() or self._progress_due:
            with self._progress_cv:
                now = time.monotonic()
                due = [t for t in self._progress_due.values() if t.progress_next <= now]
                if not due:
                    if self._stopping.is_set():
                        return
                    nxt = min((t.progress_next for t in self._progress_due.values()), default=now + 1.0)
                    self._progress_cv.wait(max(nxt - now, 0.01))
                    continue
                for t in due:
                    del self._progress_due[t.job_id]
            updates = []
            with self._mu:
                for t in due:
                    if t.state == _RUNNING and not t.abandoned and self._tasks.get(t.job_id) is t and t.progress:
                        p, m = t.progress
                        updates.append({"jobId": t.job_id, "attempt": t.attempt, "percent": p, "message": m})
                        t.progress_next = now + 1.0
            if not updates:
                continue
            try:
                self._call("ReportProgress", {"workerId": self.worker_id, "updates": updates})
                self._count("progress_sent", len(updates))
            except errors.JqError as e:
                log.debug("progress not delivered", extra={"error": str(e)})

    # --- stop ----------------------------------------------------------------------------------------

    def _stop(self) -> None:
        """Two-phase stop: take no more work; running jobs get the grace period; the rest are cancelled
        (left to the server's reaper, not reported); pending reports are flushed; deregister."""
        self._stopping.set()
        self._reset_stream()
        end = time.monotonic() + self.shutdown_grace
        with self._mu:
            while self._active and time.monotonic() < end:
                self._idle.wait(end - time.monotonic())
            if self._active:
                log.warning("shutdown grace period over; cancelling the jobs still running", extra={"running": self._running})
                for t in list(self._tasks.values()):
                    if t.state == _RUNNING:
                        t.ctx._cancel(SHUTDOWN)
                    elif t.state == _QUEUED:
                        self._abandon_locked(t, SHUTDOWN)
                end = time.monotonic() + self.flush_timeout
                while self._active and time.monotonic() < end:
                    self._idle.wait(end - time.monotonic())
        if not self._reports.flush(self.flush_timeout):
            log.error("reports not delivered before shutdown; the server's reaper will settle those jobs")
        self._hb_done = True
        self._hb_now.set()
        if not self._ever_registered:
            return
        try:
            self._call("DeregisterWorker", {"workerId": self.worker_id}, self.flush_timeout)
            log.info("worker deregistered", extra={"worker_id": self.worker_id})
        except errors.JqError as e:
            log.warning("deregister failed; the server will notice the missing heartbeats", extra={"error": str(e)})


def _result_bytes(res: Any) -> bytes:
    if res is None:
        return b""
    if isinstance(res, (bytes, bytearray, memoryview)):
        return bytes(res)
    if isinstance(res, str):
        return res.encode("utf-8")
    return dumps(res)


def _truncate(s: str) -> str:
    b = s.encode("utf-8")
    if len(b) <= MAX_ERROR_BYTES:
        return s
    return b[:MAX_ERROR_BYTES - 3].decode("utf-8", "ignore") + "…"
