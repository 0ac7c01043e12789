#!/usr/bin/env python3
"""The Python worker of the conformance suite (test/conformance): one handler per scenario, chosen by
job type. Stops in two phases on SIGTERM; prints its counters as one JSON line on exit.

    conformance_worker.py --addr 127.0.0.1:50051 --queue q --concurrency 4 [--worker-id W] [--grace S]
"""

import argparse
import json
import logging
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import jqsdk  # noqa: E402


def payload(ctx):
    return ctx.json() if ctx.payload else {}


def sleep_ms(ctx) -> None:
    """Sleep the payload's ms, cooperatively: a cancelled job (timeout, CancelJob, fence, shutdown) fails."""
    if ctx.wait(payload(ctx).get("ms", 0) / 1000):
        ctx.raise_if_cancelled()


def succeed(ctx):
    return {"ok": True, "attempt": ctx.attempt, "lang": "python"}


def fail_once(ctx):
    if ctx.job.retry_count == 0:
        raise RuntimeError("first attempt fails")
    return succeed(ctx)


def fail_permanent(ctx):
    raise jqsdk.PermanentError("cannot succeed")


def retry_after(ctx):
    if ctx.job.retry_count == 0:
        raise jqsdk.RetryAfter(payload(ctx).get("seconds", 2))
    return succeed(ctx)


def sleep(ctx):
    sleep_ms(ctx)
    return succeed(ctx)


def progress(ctx):
    for p in (25, 50, 75):
        ctx.progress(p, f"step {p}")
        if ctx.wait(payload(ctx).get("step_ms", 1200) / 1000):
            ctx.raise_if_cancelled()
    return succeed(ctx)


HANDLERS = {"succeed": succeed, "fail_once": fail_once, "fail_permanent": fail_permanent, "retry_after": retry_after,
            "sleep": sleep, "progress": progress, "noop": lambda ctx: None}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--addr", required=True)
    ap.add_argument("--queue", action="append", required=True)
    ap.add_argument("--concurrency", type=int, default=4)
    ap.add_argument("--prefetch", type=int, default=0)
    ap.add_argument("--worker-id")
    ap.add_argument("--grace", type=float, default=30.0)
    a = ap.parse_args()
    logging.basicConfig(level=os.environ.get("JQ_SDK_LOG", "WARNING"), stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(message)s")
    w = jqsdk.Worker(a.addr, queues=a.queue, handlers=HANDLERS, concurrency=a.concurrency, prefetch=a.prefetch,
                     worker_id=a.worker_id, token=os.environ.get("JQ_TOKEN") or None, shutdown_grace=a.grace)
    w.run_until_signal()
    print(json.dumps(dict(w.stats)), flush=True)


if __name__ == "__main__":
    main()
