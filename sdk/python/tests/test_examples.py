"""The examples run against a real server: the producer's URLs are served by a local HTTP server."""

import http.server
import json
import os
import signal
import subprocess
import sys
import threading
import unittest

from base import ServerCase

EXAMPLES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples")


class _API(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        if self.path == "/missing":
            self.send_response(404)
            self.end_headers()
            return
        body = b"hello from " + self.path.encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


class ExamplesTest(ServerCase):
    def test_http_worker_and_producer(self):
        api = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _API)
        threading.Thread(target=api.serve_forever, daemon=True).start()
        self.addCleanup(api.server_close)
        self.addCleanup(api.shutdown)
        base = f"http://127.0.0.1:{api.server_address[1]}"
        q = self.new_queue()
        env = {**os.environ, "JQ_ADDR": self.server.addr, "JQ_QUEUE": q}
        worker = subprocess.Popen([sys.executable, os.path.join(EXAMPLES, "http_worker.py")], env=env,
                                  stderr=subprocess.PIPE)
        try:
            out = subprocess.run([sys.executable, os.path.join(EXAMPLES, "producer.py"), base + "/a", base + "/missing"],
                                 env=env, capture_output=True, timeout=120)
        finally:
            worker.send_signal(signal.SIGTERM)
            _, err = worker.communicate(timeout=60)
        self.assertEqual(worker.returncode, 0, err)
        lines = [json.loads(x) for x in out.stdout.decode().splitlines()]
        self.assertEqual(out.returncode, 1, out.stderr)  # one URL failed
        self.assertEqual(lines[0]["result"]["status"], 200)
        self.assertEqual(lines[0]["result"]["bytes"], len(b"hello from /a"))
        self.assertIn("HTTP 404", lines[1]["error"])


if __name__ == "__main__":
    unittest.main()
