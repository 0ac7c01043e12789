"""The client against a real jq server: submit, get, wait, watch, cancel, result, errors, auth, TLS."""

import hashlib
import os
import secrets
import shutil
import subprocess
import tempfile
import unittest

from base import ServerCase, jqsdk, Server


class ClientTest(ServerCase):
    def test_submit_get_and_json_payload_bytes(self):
        q = self.new_queue()
        # A JSON payload sent as JSON comes back byte for byte, whitespace included (docs/api.md).
        raw = b'{"a": 1,  "b": [true, null]}'
        jid = self.client.submit(q, "t", raw)  # bytes: sent base64
        job = self.client.get(jid)
        self.assertEqual(job.payload, raw)
        self.assertEqual(job.state, "PENDING")
        self.assertEqual(job.json(), {"a": 1, "b": [True, None]})
        binary = bytes(range(256))
        self.assertEqual(self.client.get(self.client.submit(q, "t", binary)).payload, binary)
        self.assertEqual(self.client.get(self.client.submit(q, "t", {"x": "é"})).payload, '{"x":"é"}'.encode())

    def test_submit_many_and_idempotency(self):
        q = self.new_queue()
        out = self.client.submit_many([jqsdk.job_spec(q, "t", {"i": i}, labels={"k": "v"}) for i in range(5)])
        self.assertEqual(len({s.job_id for s in out}), 5)
        a = self.client.submit(q, "t", {"i": 1}, idempotency_key="k1")
        b = self.client.submit(q, "t", {"i": 1}, idempotency_key="k1")
        self.assertEqual(a, b)
        with self.assertRaises(jqsdk.FailedPrecondition) as cm:
            self.client.submit(q, "t", {"i": 2}, idempotency_key="k1")
        self.assertIn("idempotency", cm.exception.message)

    def test_cancel_pending_and_result(self):
        q = self.new_queue()
        jid = self.client.submit(q, "t")
        r = self.client.result(jid)
        self.assertFalse(r.found)
        self.assertEqual(r.state, "PENDING")
        c = self.client.cancel(jid)
        self.assertFalse(c.cancel_requested)
        self.assertEqual(c.job.state, "DEAD_LETTERED")
        self.assertEqual(c.job.failure_reason, "cancelled")
        self.assertEqual(self.client.wait(jid, timeout=5).state, "DEAD_LETTERED")
        with self.assertRaises(jqsdk.JobFailed):
            self.client.wait_result(jid, timeout=5)
        r = self.client.result(jid)
        self.assertTrue(r.found)
        self.assertFalse(r.success)
        self.assertEqual(r.reason, "cancelled")

    def test_errors_carry_code_and_message(self):
        with self.assertRaises(jqsdk.InvalidArgument) as cm:
            self.client.get("not-a-uuid")
        self.assertEqual(cm.exception.code, "invalid_argument")
        self.assertIn("not a UUID", cm.exception.message)
        with self.assertRaises(jqsdk.NotFound):
            self.client.get("6f0a1c8e-3b5d-4a8e-9c1f-2d3e4f5a6b7c")
        with self.assertRaises(jqsdk.InvalidArgument):
            self.client.submit("no spaces allowed", "t")
        with self.assertRaises(jqsdk.Unavailable), jqsdk.Client("127.0.0.1:1") as c:
            c.get("6f0a1c8e-3b5d-4a8e-9c1f-2d3e4f5a6b7c")

    def test_wait_times_out(self):
        q = self.new_queue()
        jid = self.client.submit(q, "t")
        with self.assertRaises(jqsdk.DeadlineExceeded):
            self.client.wait(jid, timeout=0.5)


class AuthTest(ServerCase):
    admin_token = "jq_" + secrets.token_urlsafe(32)
    worker_token = "jq_" + secrets.token_urlsafe(32)
    server_env = {
        "JQ_AUTH_ENABLED": "true", "JQ_AUTH_ALLOW_INSECURE": "true",
        "JQ_AUTH_TOKENS": ",".join(f"name={n};roles={r};sha256={hashlib.sha256(t.encode()).hexdigest()}"
                                   for n, r, t in (("ops", "admin", admin_token), ("w", "worker", worker_token))),
    }

    def test_bearer_token(self):
        q = self.new_queue()  # with the admin token
        with self.assertRaises(jqsdk.Unauthenticated), jqsdk.Client(self.server.addr) as c:
            c.submit(q, "t")
        with self.assertRaises(jqsdk.Unauthenticated) as cm, jqsdk.Client(self.server.addr, token="jq_wrong") as c:
            c.submit(q, "t")
        self.assertTrue(cm.exception.message)
        with self.assertRaises(jqsdk.PermissionDenied), jqsdk.Client(self.server.addr, token=self.worker_token) as c:
            c.submit(q, "t")
        # A worker whose registration is refused stops and says why.
        bad = jqsdk.Worker(self.server.addr, queues=[q], handlers={"echo": lambda ctx: ctx.payload}, token="jq_wrong")
        with self.assertRaises(jqsdk.Unauthenticated):
            bad.run()
        jid = self.client.submit(q, "echo", {"v": 1}, keep_result=True)
        self.start_worker(q, {"echo": lambda ctx: ctx.payload}, token=self.worker_token)
        self.assertEqual(self.client.wait_result(jid, timeout=20), b'{"v":1}')


def _openssl(*args, cwd):
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


@unittest.skipUnless(shutil.which("openssl"), "openssl is not installed: the mTLS test needs it to make certificates")
class MTLSTest(ServerCase):
    @classmethod
    def setUpClass(cls):
        d = cls.certs = tempfile.mkdtemp(prefix="jq-sdk-tls-")
        _openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "1",
                 "-subj", "/CN=test-ca", "-keyout", "ca.key", "-out", "ca.pem", cwd=d)
        for name, ext in (("server", "subjectAltName=IP:127.0.0.1"), ("worker-1", "extendedKeyUsage=clientAuth"),
                          ("admin", "extendedKeyUsage=clientAuth")):
            _openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-subj", f"/CN={name}",
                     "-keyout", f"{name}.key", "-out", f"{name}.csr", cwd=d)
            with open(os.path.join(d, f"{name}.ext"), "w") as f:
                f.write(ext + "\n")
            _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
                     "-days", "1", "-extfile", f"{name}.ext", "-out", f"{name}.pem", cwd=d)
        cls.server_env = {
            "JQ_GRPC_TLS_ENABLED": "true", "JQ_GRPC_TLS_CERT_PATH": os.path.join(d, "server.pem"),
            "JQ_GRPC_TLS_KEY_PATH": os.path.join(d, "server.key"), "JQ_GRPC_TLS_CLIENT_CA_PATH": os.path.join(d, "ca.pem"),
            "JQ_AUTH_ENABLED": "true", "JQ_AUTH_MTLS_PRINCIPALS": "cn=admin;roles=admin,cn=worker-*;roles=worker",
        }
        cls.server = Server(cls.server_env, heartbeat_timeout_s=cls.heartbeat_timeout_s)
        cls.client = jqsdk.Client(cls.server.addr, ssl_context=cls.tls("admin"))

    @classmethod
    def tls(cls, name):
        d = cls.certs
        return jqsdk.tls_context(os.path.join(d, "ca.pem"), os.path.join(d, f"{name}.pem"), os.path.join(d, f"{name}.key"))

    @classmethod
    def tearDownClass(cls):
        super().tearDownClass()
        shutil.rmtree(cls.certs, True)

    def test_client_certificate(self):
        q = self.new_queue()
        jid = self.client.submit(q, "echo", b"hi", keep_result=True)
        w = jqsdk.Worker(self.server.addr, queues=[q], handlers={"echo": lambda ctx: ctx.payload},
                         ssl_context=self.tls("worker-1"))
        import threading
        t = threading.Thread(target=w.run, daemon=True)
        t.start()
        try:
            self.assertEqual(self.client.wait_result(jid, timeout=20), b"hi")
        finally:
            w.stop()
            t.join(20)
        # No client certificate: the handshake is refused.
        with self.assertRaises(jqsdk.JqError), jqsdk.Client(
                self.server.addr, ssl_context=jqsdk.tls_context(os.path.join(self.certs, "ca.pem"))) as c:
            c.get(jid)


if __name__ == "__main__":
    unittest.main()
