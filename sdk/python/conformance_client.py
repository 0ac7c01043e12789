#!/usr/bin/env python3
"""The Python client of the conformance suite's cross-language test: submits one job, waits for it and
prints its result bytes.

    conformance_client.py --addr 127.0.0.1:50051 --queue q --type succeed
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import jqsdk  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--addr", required=True)
    ap.add_argument("--queue", required=True)
    ap.add_argument("--type", default="succeed")
    a = ap.parse_args()
    with jqsdk.Client(a.addr, token=os.environ.get("JQ_TOKEN") or None) as c:
        job_id = c.submit(a.queue, a.type, {"from": "python"}, keep_result=True)
        sys.stdout.buffer.write(c.wait_result(job_id, timeout=60) + b"\n")


if __name__ == "__main__":
    main()
