#!/usr/bin/env python3
"""A worker that calls an HTTP API for each job of type "fetch": the payload {"url": ...} is fetched and
its status and size become the result. A 429 or 503 with Retry-After retries after that delay, a 4xx
other than 429 is permanent, and the job's timeout bounds the request.

    JQ_ADDR=localhost:50051 python3 http_worker.py     # SIGTERM/Ctrl-C: finishes the jobs in flight
"""

import hashlib
import os
import sys
import urllib.error
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import jqsdk  # noqa: E402


def fetch(ctx: jqsdk.JobContext):
    url = ctx.json()["url"]
    try:
        with urllib.request.urlopen(url, timeout=ctx.remaining()) as resp:
            body = resp.read()
    except urllib.error.HTTPError as e:
        if e.code in (429, 503):
            raise jqsdk.RetryAfter(float(e.headers.get("Retry-After", "1")), f"{url}: HTTP {e.code}")
        if 400 <= e.code < 500:
            raise jqsdk.PermanentError(f"{url}: HTTP {e.code}")
        raise
    ctx.progress(100, "fetched")
    return {"url": url, "status": resp.status, "bytes": len(body), "sha256": hashlib.sha256(body).hexdigest()}


if __name__ == "__main__":
    jqsdk.Worker(os.environ.get("JQ_ADDR", "localhost:50051"), token=os.environ.get("JQ_TOKEN"),
                 queues=[os.environ.get("JQ_QUEUE", "default")], handlers={"fetch": fetch},
                 concurrency=int(os.environ.get("JQ_CONCURRENCY", "8"))).run_until_signal()
