import os
import sys
import threading
import unittest
import uuid

sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..")))
import jqsdk  # noqa: E402
from jqserver import Server, eventually  # noqa: E402,F401


class ServerCase(unittest.TestCase):
    """One jq server per test class; each test makes its own queue."""

    server_env: dict = {}
    heartbeat_timeout_s = 4

    @classmethod
    def setUpClass(cls):
        cls.server = Server(cls.server_env, heartbeat_timeout_s=cls.heartbeat_timeout_s)
        cls.client = jqsdk.Client(cls.server.addr, token=getattr(cls, "admin_token", None))

    @classmethod
    def tearDownClass(cls):
        cls.client.close()
        cls.server.close()

    def new_queue(self, **opts) -> str:
        name = "q-" + uuid.uuid4().hex[:10]
        opts.setdefault("backoff_base", 0.2)
        opts.setdefault("backoff_max", 0.5)
        self.client.create_queue(name, **opts)
        return name

    def start_worker(self, queue: str, handlers: dict, **opts) -> jqsdk.Worker:
        opts.setdefault("concurrency", 4)
        opts.setdefault("shutdown_grace", 10)
        opts.setdefault("min_backoff", 0.05)
        w = jqsdk.Worker(self.server.addr, queues=[queue], handlers=handlers, **opts)
        t = threading.Thread(target=w.run, daemon=True)
        t.start()

        def stop():
            w.stop()
            t.join(30)
            self.assertFalse(t.is_alive(), "worker did not stop")
        w.stop_and_wait = stop
        self.addCleanup(stop)
        return w

    def transitions(self, job_id: str) -> list[tuple[str, str, str]]:
        return [(e.from_state, e.to_state, e.reason) for e in self.client.events(job_id)]
