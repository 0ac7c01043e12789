#!/usr/bin/env python3
"""A producer: submits one "fetch" job per URL given on the command line in one atomic batch, waits for
each and prints its result.

    JQ_ADDR=localhost:50051 python3 producer.py https://example.com/ https://example.org/
"""

import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import jqsdk  # noqa: E402


def main(urls):
    queue = os.environ.get("JQ_QUEUE", "default")
    with jqsdk.Client(os.environ.get("JQ_ADDR", "localhost:50051"), token=os.environ.get("JQ_TOKEN")) as c:
        jobs = c.submit_many([jqsdk.job_spec(queue, "fetch", {"url": u}, keep_result=True, max_retries=3) for u in urls])
        failed = 0
        for u, s in zip(urls, jobs):
            try:
                print(json.dumps({"url": u, "job_id": s.job_id, "result": json.loads(c.wait_result(s.job_id, timeout=60))}))
            except jqsdk.JobFailed as e:
                failed += 1
                print(json.dumps({"url": u, "job_id": s.job_id, "error": e.job.last_error}))
        return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
