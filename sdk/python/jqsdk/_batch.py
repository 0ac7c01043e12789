"""Background helpers of the worker: a timer wheel and the ack/report batcher."""

from __future__ import annotations

import heapq
import itertools
import logging
import random
import threading
import time
from typing import Callable, Generic, TypeVar

from . import errors

T = TypeVar("T")
MAX_BATCH = 1000  # the API's limit of leases or reports in one call


class Timers:
    """Runs short callbacks at given monotonic times on one thread."""

    def __init__(self, name: str):
        self._heap: list = []
        self._seq = itertools.count()
        self._cv = threading.Condition()
        self._stopped = False
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def at(self, when: float, fn: Callable[[], None]) -> None:
        with self._cv:
            heapq.heappush(self._heap, (when, next(self._seq), fn))
            if self._heap[0][2] is fn:
                self._cv.notify()

    def stop(self) -> None:
        with self._cv:
            self._stopped = True
            self._cv.notify()

    def _run(self) -> None:
        while True:
            with self._cv:
                while not self._stopped and (not self._heap or self._heap[0][0] > time.monotonic()):
                    self._cv.wait(None if not self._heap else self._heap[0][0] - time.monotonic())
                if self._stopped:
                    return
                _, _, fn = heapq.heappop(self._heap)
            try:
                fn()
            except Exception:  # noqa: BLE001 - a timer callback must not end the thread
                logging.getLogger("jqsdk.worker").exception("timer callback failed")


def backoff(attempt: int, lo: float, hi: float) -> float:
    """Capped exponential backoff with full jitter in its upper half."""
    d = min(hi, lo * (2 ** min(attempt, 20)))
    return d / 2 + random.random() * d / 2


# Errors a retry cannot fix: the items are given up at once.
_FINAL = (errors.InvalidArgument, errors.Unauthenticated, errors.PermissionDenied)


class Batcher(Generic[T]):
    """One sender thread for one kind of call (acks, reports). While a call is in flight new items
    accumulate; the next call takes all of them (up to MAX_BATCH). An idle sender sends a lone item at
    once: batching costs no latency and grows with load. A failed call is retried with backoff, merged
    with newer items, until each item's deadline; then ``done(item, None, err)``."""

    def __init__(self, name: str, send: Callable[[list[T]], list[dict]], done: Callable[[T, dict | None, Exception | None], None],
                 min_backoff: float = 0.1, max_backoff: float = 2.0):
        self.name, self._send, self._done = name, send, done
        self._lo, self._hi = min_backoff, max_backoff
        self._items: list[tuple[T, float]] = []
        self._cv = threading.Condition()
        self._busy = False
        self._stopped = False
        self.calls = 0
        self._thread = threading.Thread(target=self._run, name="jq-" + name, daemon=True)
        self._thread.start()

    def add(self, item: T, deadline: float) -> None:
        with self._cv:
            self._items.append((item, deadline))
            self._cv.notify_all()

    def flush(self, timeout: float) -> bool:
        """Wait until every item is settled; False when ``timeout`` passed first."""
        end = time.monotonic() + timeout
        with self._cv:
            while self._items or self._busy:
                left = end - time.monotonic()
                if left <= 0:
                    return False
                self._cv.wait(left)
        return True

    def stop(self) -> None:
        with self._cv:
            self._stopped = True
            self._cv.notify_all()

    def _run(self) -> None:
        failures = 0
        while True:
            with self._cv:
                while not self._items and not self._stopped:
                    self._cv.wait()
                if self._stopped:
                    return
                batch, self._items = self._items[:MAX_BATCH], self._items[MAX_BATCH:]
                self._busy = True
            try:
                self.calls += 1
                results = self._send([it for it, _ in batch])
                failures = 0
                for (it, _), res in zip(batch, results):
                    self._done(it, res, None)
                retry = []
            except _FINAL as e:
                for it, _ in batch:
                    self._done(it, None, e)
                retry = []
            except Exception as e:  # noqa: BLE001 - transient: retried until each item's deadline
                failures += 1
                now = time.monotonic()
                retry = []
                for it, dl in batch:
                    if now >= dl:
                        self._done(it, None, e)
                    else:
                        retry.append((it, dl))
                logging.getLogger("jqsdk.worker").warning(
                    "call failed; retrying", extra={"call": self.name, "items": len(retry), "error": str(e)})
            with self._cv:
                self._items = retry + self._items
                if retry and not self._stopped:
                    self._cv.wait(backoff(failures, self._lo, self._hi))
                self._busy = False
                self._cv.notify_all()
