"""The worker against a real jq server, each behaviour checked from the job's recorded events."""

import os
import signal
import threading
import time
import unittest

from base import ServerCase, eventually, jqsdk


def sleeper(ctx):
    """Sleeps the payload's seconds, cooperatively."""
    if ctx.wait(ctx.json().get("s", 0)):
        ctx.raise_if_cancelled()
    return {"slept": True}


class WorkerTest(ServerCase):
    def test_success_result_and_events(self):
        q = self.new_queue()
        self.start_worker(q, {"greet": lambda ctx: {"hello": ctx.json()["name"]}})
        jid = self.client.submit(q, "greet", {"name": "Ada"}, keep_result=True)
        self.assertEqual(self.client.wait_result(jid, timeout=20), b'{"hello":"Ada"}')
        self.assertEqual([t[1] for t in self.transitions(jid)], ["PENDING", "ASSIGNED", "RUNNING", "DONE"])

    def test_failure_then_retry(self):
        q = self.new_queue()

        def flaky(ctx):
            if ctx.attempt == 1:
                raise ValueError("boom")
            return "ok"
        self.start_worker(q, {"flaky": flaky})
        jid = self.client.submit(q, "flaky", max_retries=2)
        job = self.client.wait(jid, timeout=20)
        self.assertEqual(job.state, "DONE")
        self.assertEqual(job.attempt, 2)
        tr = self.transitions(jid)
        self.assertIn(("RUNNING", "FAILED", "error"), tr)
        self.assertEqual(tr[-1][1], "DONE")

    def test_permanent_failure_dead_letters_at_once(self):
        q = self.new_queue()

        def bad(ctx):
            raise jqsdk.PermanentError("bad input")
        self.start_worker(q, {"bad": bad})
        jid = self.client.submit(q, "bad", max_retries=5)
        job = self.client.wait(jid, timeout=20)
        self.assertEqual(job.state, "DEAD_LETTERED")
        self.assertEqual(job.attempt, 1)
        self.assertIn("bad input", job.last_error)
        r = self.client.result(jid)
        self.assertFalse(r.should_retry)

    def test_retry_after_delays_the_next_attempt(self):
        q = self.new_queue()
        starts = []

        def limited(ctx):
            starts.append(time.monotonic())
            if ctx.attempt == 1:
                raise jqsdk.RetryAfter(2.0, "429 from upstream")
            return "ok"
        self.start_worker(q, {"limited": limited})
        jid = self.client.submit(q, "limited", max_retries=2)
        self.assertEqual(self.client.wait(jid, timeout=30).state, "DONE")
        self.assertGreaterEqual(starts[1] - starts[0], 1.9)  # the queue's backoff alone is 0.2 s

    def test_timeout(self):
        q = self.new_queue()
        self.start_worker(q, {"sleep": sleeper})
        jid = self.client.submit(q, "sleep", {"s": 30}, timeout=1, max_retries=0)
        job = self.client.wait(jid, timeout=20)
        self.assertEqual(job.state, "DEAD_LETTERED")
        self.assertEqual(job.failure_reason, "timeout")

    def test_cancel_while_running(self):
        q = self.new_queue()
        running = threading.Event()

        def long(ctx):
            running.set()
            return sleeper(ctx)
        self.start_worker(q, {"long": long})
        jid = self.client.submit(q, "long", {"s": 60})
        self.assertTrue(running.wait(20))
        # Acknowledged (RUNNING) after the worker's ack delay; an ASSIGNED job is cancelled without asking.
        eventually(lambda: self.client.get(jid).state == "RUNNING", what="RUNNING")
        c = self.client.cancel(jid)
        self.assertTrue(c.cancel_requested)
        job = self.client.wait(jid, timeout=20)
        self.assertEqual(job.state, "DEAD_LETTERED")
        self.assertEqual(job.failure_reason, "cancelled")

    def test_progress_seen_while_running(self):
        q = self.new_queue()
        release = threading.Event()

        def slow(ctx):
            ctx.progress(10, "starting")
            ctx.progress(42, "half way")
            release.wait(20)
            return "ok"
        self.start_worker(q, {"slow": slow})
        jid = self.client.submit(q, "slow")
        job = eventually(lambda: (j := self.client.get(jid)).progress and j.progress.percent == 42 and j,
                         what="progress 42")
        self.assertEqual(job.progress.message, "half way")
        release.set()
        self.assertEqual(self.client.wait(jid, timeout=20).state, "DONE")

    def test_graceful_stop_finishes_jobs_in_flight(self):
        q = self.new_queue()
        started = threading.Event()

        def work(ctx):
            started.set()
            time.sleep(1.0)
            return "finished"
        w = self.start_worker(q, {"work": work})
        jid = self.client.submit(q, "work", keep_result=True)
        self.assertTrue(started.wait(20))
        w.stop_and_wait()
        self.assertEqual(self.client.get(jid).state, "DONE")  # reported before the worker left
        workers = self.client.transport.unary("/jq.v1.WorkerService/ListWorkers", {})["workers"]
        self.assertEqual([x["status"] for x in workers if x["id"] == w.worker_id], ["WORKER_STATUS_OFFLINE"])

    def test_operator_shutdown_command(self):
        q = self.new_queue()
        w = jqsdk.Worker(self.server.addr, queues=[q], handlers={"echo": lambda ctx: ctx.payload}, min_backoff=0.05)
        t = threading.Thread(target=w.run, daemon=True)
        t.start()
        self.addCleanup(lambda: (w.stop(), t.join(20)))
        self.assertEqual(self.client.wait_result(self.client.submit(q, "echo", b"x", keep_result=True), timeout=20), b"x")
        self.client.transport.unary("/jq.v1.WorkerService/ShutdownWorker", {"workerId": w.worker_id})
        t.join(20)  # the next heartbeat carries SHUTDOWN: drain, deregister, run() returns
        self.assertFalse(t.is_alive(), "run() did not return after the operator's shutdown")
        workers = self.client.transport.unary("/jq.v1.WorkerService/ListWorkers", {})["workers"]
        self.assertEqual([x["status"] for x in workers if x["id"] == w.worker_id], ["WORKER_STATUS_OFFLINE"])

    def test_grace_over_leaves_the_job_to_the_reaper(self):
        q = self.new_queue()
        started = threading.Event()

        def stubborn(ctx):
            started.set()
            ctx.wait(60)
            raise jqsdk.JobCancelled(ctx.cause)
        w = self.start_worker(q, {"stubborn": stubborn}, shutdown_grace=0.5)
        jid = self.client.submit(q, "stubborn", max_retries=3)
        self.assertTrue(started.wait(20))
        eventually(lambda: self.client.get(jid).state == "RUNNING", what="RUNNING")
        w.stop_and_wait()
        # Not reported: the deregistration fails it as worker_lost and it is retried.
        eventually(lambda: ("RUNNING", "FAILED", "worker_lost") in self.transitions(jid), what="worker_lost: %s" % self.transitions(jid))
        self.assertEqual(w.stats["abandoned"], 1)

    def test_self_fencing_when_heartbeats_fail(self):
        q = self.new_queue()
        started, fenced = threading.Event(), []

        def long(ctx):
            started.set()
            ctx.wait(60)
            fenced.append(ctx.cause)
            raise jqsdk.JobCancelled(ctx.cause)
        w = self.start_worker(q, {"long": long})
        jid = self.client.submit(q, "long", max_retries=3)
        self.assertTrue(started.wait(20))
        t0 = time.monotonic()
        os.kill(self.server.proc.pid, signal.SIGSTOP)  # heartbeats now go unanswered
        try:
            eventually(lambda: fenced, timeout=10, what="the job fenced")
        finally:
            os.kill(self.server.proc.pid, signal.SIGCONT)
        # 3/4 of the 4 s heartbeat timeout after the last renewal, i.e. before the server may reassign.
        self.assertLess(time.monotonic() - t0, 4.0)
        self.assertEqual(fenced, ["lease_expired"])
        self.assertEqual(w.stats["fenced"], 1)
        eventually(lambda: any(to == "FAILED" for _, to, _ in self.transitions(jid)), what="the attempt failed")

    def test_server_restart_mid_stream(self):
        q = self.new_queue()
        self.start_worker(q, {"echo": lambda ctx: ctx.payload})
        self.assertEqual(self.client.wait_result(self.client.submit(q, "echo", b"1", keep_result=True), timeout=20), b"1")
        self.server.stop()
        self.server.start()
        self.assertEqual(self.client.wait_result(self.client.submit(q, "echo", b"2", keep_result=True), timeout=30), b"2")

    def test_concurrency_bound_and_batched_reports(self):
        q = self.new_queue()
        lock, now, peak = threading.Lock(), [0], [0]

        def count(ctx):
            with lock:
                now[0] += 1
                peak[0] = max(peak[0], now[0])
            time.sleep(0.02)
            with lock:
                now[0] -= 1
        w = self.start_worker(q, {"count": count}, concurrency=3, prefetch=3)
        ids = [s.job_id for s in self.client.submit_many([jqsdk.job_spec(q, "count") for _ in range(200)])]
        for jid in ids[-5:]:
            self.client.wait(jid, timeout=60)
        eventually(lambda: all(self.client.get(j).state == "DONE" for j in ids[::20]), what="all done")
        self.assertLessEqual(peak[0], 3)
        self.assertEqual(w.stats["succeeded"], 200)
        self.assertLess(w._reports.calls, 200)  # batched under load


if __name__ == "__main__":
    unittest.main()
