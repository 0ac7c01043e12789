"""A real jq server for the tests: `jq --role=server` on the embedded store, on free ports.

The binary is $JQ_BIN, else built once per test run from the repository (`go build`)."""

from __future__ import annotations

import atexit
import os
import shutil
import socket
import subprocess
import tempfile
import threading
import time

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
_build_lock = threading.Lock()
_built: str | None = None


def jq_binary() -> str:
    global _built
    if os.environ.get("JQ_BIN"):
        return os.environ["JQ_BIN"]
    with _build_lock:
        if _built is None:
            d = tempfile.mkdtemp(prefix="jq-sdk-bin-")
            atexit.register(shutil.rmtree, d, True)
            out = os.path.join(d, "jq")
            subprocess.run(["go", "build", "-o", out, "."], cwd=REPO, check=True)
            _built = out
        return _built


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """One server process. ``env`` adds JQ_ settings (e.g. auth, TLS)."""

    def __init__(self, env: dict | None = None, heartbeat_timeout_s: int = 30, heartbeat_interval_s: int = 1):
        self.dir = tempfile.mkdtemp(prefix="jq-sdk-srv-")
        self.port = free_port()
        self.env = {
            **os.environ,
            "JQ_STORE_DRIVER": "sqlite", "JQ_STORE_DATA_DIR": os.path.join(self.dir, "data"),
            "JQ_GRPC_HOST": "127.0.0.1", "JQ_GRPC_PORT": str(self.port),
            "JQ_HEALTH_PORT": str(free_port()), "JQ_METRICS_PORT": str(free_port()),
            "JQ_SCHEDULER_WORKER_HEARTBEAT_TIMEOUT_S": str(heartbeat_timeout_s),
            "JQ_WORKER_HEARTBEAT_INTERVAL_S": str(heartbeat_interval_s),
            "JQ_SCHEDULER_REAPER_INTERVAL_MS": "200",
            "JQ_LOG_LEVEL": "info",
            **(env or {}),
        }
        self.addr = f"127.0.0.1:{self.port}"
        self.proc: subprocess.Popen | None = None
        self.log_path = os.path.join(self.dir, "server.log")
        self.start()

    def start(self, timeout: float = 60.0) -> None:
        log = open(self.log_path, "ab")
        mark = os.path.getsize(self.log_path)
        self.proc = subprocess.Popen([jq_binary(), "--role=server"], env=self.env, stdout=log, stderr=subprocess.STDOUT)
        log.close()
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            with open(self.log_path, "rb") as f:
                f.seek(mark)
                if b'"server started"' in f.read():
                    return
            if self.proc.poll() is not None:
                raise RuntimeError(f"jq server exited {self.proc.returncode}: {self.log()[-2000:]}")
            time.sleep(0.05)
        raise RuntimeError("jq server did not start: " + self.log()[-2000:])

    def log(self) -> str:
        with open(self.log_path, "rb") as f:
            return f.read().decode(errors="replace")

    def stop(self, kill: bool = False) -> None:
        if self.proc and self.proc.poll() is None:
            if kill:
                self.proc.kill()
            else:
                self.proc.terminate()
            self.proc.wait(30)

    def close(self) -> None:
        self.stop()
        shutil.rmtree(self.dir, True)


def eventually(fn, timeout: float = 20.0, interval: float = 0.05, what: str = "condition"):
    """Poll ``fn`` until it returns a true value (returned) or ``timeout`` passes (AssertionError)."""
    end = time.monotonic() + timeout
    last = None
    while time.monotonic() < end:
        try:
            v = fn()
            if v:
                return v
        except AssertionError as e:
            last = e
        time.sleep(interval)
    raise AssertionError(f"{what} not reached within {timeout}s" + (f": {last}" if last else ""))
