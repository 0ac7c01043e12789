"""jq's Python SDK: a client and a worker for the jq job queue, on Python's standard library alone.

It speaks the Connect protocol with JSON over HTTP/1.1 (docs/sdks.md)::

    import jqsdk
    c = jqsdk.Client("localhost:50051")
    job_id = c.submit("default", "greet", {"name": "Ada"}, keep_result=True)
    print(c.wait_result(job_id, timeout=30))

    def greet(ctx: jqsdk.JobContext):
        return {"greeting": "hello " + ctx.json()["name"]}

    jqsdk.Worker("localhost:50051", queues=["default"], handlers={"greet": greet}).run_until_signal()
"""

from ._wire import Transport, tls_context
from .client import CancelResult, Client, job_spec
from .errors import (Aborted, AlreadyExists, Canceled, DataLoss, DeadlineExceeded, FailedPrecondition, Internal,
                     InvalidArgument, JobCancelled, JobFailed, JqError, NotFound, OutOfRange, PermanentError,
                     PermissionDenied, ResourceExhausted, RetryAfter, Unauthenticated, Unavailable, Unimplemented,
                     Unknown)
from .types import Job, JobEvent, Progress, Result, Submitted
from .worker import JobContext, JobDone, Worker, default_worker_id

__version__ = "0.1.0"

__all__ = [
    "Aborted", "AlreadyExists", "CancelResult", "Canceled", "Client", "DataLoss", "DeadlineExceeded",
    "FailedPrecondition", "Internal", "InvalidArgument", "Job", "JobCancelled", "JobContext", "JobDone", "JobEvent",
    "JobFailed", "JqError", "NotFound", "OutOfRange", "PermanentError", "PermissionDenied", "Progress",
    "ResourceExhausted", "Result", "RetryAfter", "Submitted", "Transport", "Unauthenticated", "Unavailable",
    "Unimplemented", "Unknown", "Worker", "default_worker_id", "job_spec", "tls_context",
]
