"""The Connect protocol with JSON over HTTP/1.1, on the standard library alone.

Unary calls are ``POST /<service>/<method>`` with ``Content-Type: application/json``: the request message
is the body, the answer is the response message (200) or a Connect error object ``{"code", "message"}``.
Server streams send one enveloped request (``application/connect+json``) and read enveloped messages
(1 flag byte, 4-byte big-endian length, the JSON); the last one has flag 0x02 and carries the stream's
error, if any.

jq writes a bytes field (``payload``, ``data``) that holds JSON text as that JSON value, byte for byte
(docs/api.md, "JSON payloads"); :func:`loads` hands such a field back as the exact bytes the server
wrote, and a base64 string as-is (the typed layer decodes it).
"""

from __future__ import annotations

import base64
import http.client
import json
import json.decoder
import json.scanner
import queue
import re
import socket
import ssl
import struct
import threading
from typing import Any, Iterator
from urllib.parse import urlsplit

from . import errors

_BYTES_KEYS = frozenset(("payload", "data"))
# A bytes field whose value is not a string (base64) or null: only then is the slow decoder needed.
_RAW_BYTES = re.compile(r'"(?:payload|data)"\s*:\s*[\[{0-9tf-]')

_END_STREAM = 0x02
_MAX_MESSAGE = 64 << 20


class _Raw:
    """A parsed value with the text it was parsed from."""

    __slots__ = ("value", "text")

    def __init__(self, value, text):
        self.value, self.text = value, text


def _unwrap(v):
    return v.value if type(v) is _Raw else v


def _raw_loads(text: str):
    """json.loads, except that a bytes field holding a JSON value becomes that value's exact text."""
    dec = json.JSONDecoder()

    def pairs(kvs):
        out = {}
        for k, v in kvs:
            if type(v) is _Raw:
                v = v.text.encode() if k in _BYTES_KEYS else v.value
            out[k] = v
        return out

    def parse_object(s_and_end, strict, _scan, object_hook, object_pairs_hook, memo=None):
        return json.decoder.JSONObject(s_and_end, strict, scan, object_hook, pairs, memo if memo is not None else {})

    def parse_array(s_and_end, _scan):
        vals, end = json.decoder.JSONArray(s_and_end, scan)
        return [_unwrap(v) for v in vals], end

    dec.parse_object = parse_object
    dec.parse_array = parse_array
    dec.object_pairs_hook = pairs
    inner = json.scanner.py_make_scanner(dec)

    def scan(s, idx):
        v, end = inner(s, idx)
        if v is not None and not isinstance(v, str):
            return _Raw(v, s[idx:end]), end
        return v, end

    s = text.strip()
    v, end = scan(s, 0)
    if end != len(s):
        raise ValueError("extra data after the JSON value")
    return _unwrap(v)


def loads(data: bytes) -> Any:
    text = data.decode("utf-8")
    if _RAW_BYTES.search(text):
        return _raw_loads(text)
    return json.loads(text)


def dumps(msg: Any) -> bytes:
    return json.dumps(msg, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def bytes_field(value) -> Any:
    """A bytes field for a request: JSON-able values (dict, list, number, bool) go as JSON, which the server
    stores as their text; bytes and str go as base64 (str as its UTF-8)."""
    if value is None:
        return None
    if isinstance(value, str):
        value = value.encode("utf-8")
    if isinstance(value, (bytes, bytearray, memoryview)):
        return base64.b64encode(bytes(value)).decode("ascii")
    return value


def bytes_value(v) -> bytes:
    """A bytes field of a response: raw JSON bytes (see :func:`loads`), or base64."""
    if v is None:
        return b""
    if isinstance(v, bytes):
        return v
    if isinstance(v, str):
        return base64.b64decode(v)
    return dumps(v)


def duration(seconds: float | None) -> str | None:
    """A google.protobuf.Duration in its JSON form."""
    if seconds is None:
        return None
    return f"{seconds:.9f}".rstrip("0").rstrip(".") + "s"


def parse_duration(v) -> float | None:
    if not v:
        return None
    return float(v[:-1])


def tls_context(ca_file: str | None = None, cert_file: str | None = None, key_file: str | None = None) -> ssl.SSLContext:
    """An SSL context for a jq server with TLS: ``ca_file`` verifies the server (default: the system's CAs);
    ``cert_file`` and ``key_file`` present a client certificate (mTLS)."""
    ctx = ssl.create_default_context(cafile=ca_file)
    if cert_file:
        ctx.load_cert_chain(cert_file, key_file)
    return ctx


class Transport:
    """HTTP/1.1 connections to one jq server, shared by the threads of a client or worker.

    ``addr`` is ``host:port`` or a URL (``https://host:port`` turns TLS on with the system's CAs).
    ``token`` is sent as ``Authorization: Bearer``; ``ssl_context`` (see :func:`tls_context`) turns TLS on.
    """

    def __init__(self, addr: str, *, token: str | None = None, ssl_context: ssl.SSLContext | None = None,
                 timeout: float = 10.0):
        if "://" not in addr:
            addr = ("https://" if ssl_context else "http://") + addr
        u = urlsplit(addr)
        if u.scheme not in ("http", "https") or not u.hostname:
            raise ValueError(f"server address {addr!r}: want host:port or http(s)://host:port")
        self.tls = u.scheme == "https"
        if self.tls and ssl_context is None:
            ssl_context = ssl.create_default_context()
        self.host, self.port = u.hostname, u.port or (443 if self.tls else 80)
        self.ssl_context = ssl_context
        self.timeout = timeout
        self._auth = {"Authorization": "Bearer " + token} if token else {}
        self._idle: queue.LifoQueue = queue.LifoQueue()
        self._closed = False

    def _new_conn(self, timeout: float | None) -> http.client.HTTPConnection:
        if self.tls:
            return http.client.HTTPSConnection(self.host, self.port, timeout=timeout, context=self.ssl_context)
        return http.client.HTTPConnection(self.host, self.port, timeout=timeout)

    def _headers(self, content_type: str, timeout: float | None) -> dict:
        h = {"Content-Type": content_type, "Connect-Protocol-Version": "1", "User-Agent": "jq-python-sdk", **self._auth}
        if timeout:
            h["Connect-Timeout-Ms"] = str(max(int(timeout * 1000), 1))
        return h

    def close(self) -> None:
        self._closed = True
        while True:
            try:
                self._idle.get_nowait().close()
            except queue.Empty:
                return

    def unary(self, path: str, msg: dict, timeout: float | None = None) -> dict:
        """Call ``path`` (``/jq.v1.JobService/GetJob``) with ``msg``; the response message, or a JqError."""
        timeout = timeout or self.timeout
        body = dumps(msg)
        headers = self._headers("application/json", timeout)
        for attempt in range(2):
            reused = True
            try:
                conn = self._idle.get_nowait()
            except queue.Empty:
                conn, reused = self._new_conn(timeout), False
            try:
                if conn.sock is not None:
                    conn.sock.settimeout(timeout + 1)
                else:
                    conn.timeout = timeout + 1
                conn.request("POST", path, body, headers)
                resp = conn.getresponse()
                data = resp.read()
            except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError) as e:
                conn.close()
                if reused and attempt == 0:
                    continue  # an idle connection the server had closed: the request never reached it
                raise errors.Unavailable(f"{path}: {e}") from e
            except socket.timeout as e:
                conn.close()
                raise errors.DeadlineExceeded(f"{path}: no answer within {timeout:g}s") from e
            except (OSError, http.client.HTTPException) as e:
                conn.close()
                raise errors.Unavailable(f"{path}: {e}") from e
            if resp.will_close or self._closed:
                conn.close()
            else:
                self._idle.put(conn)
            if resp.status == 200:
                return loads(data) if data else {}
            raise _error_of(resp.status, data)
        raise AssertionError("unreachable")

    def stream(self, path: str, msg: dict, timeout: float | None = None) -> "ServerStream":
        """Open a server stream; iterate the returned object for its messages."""
        conn = self._new_conn(self.timeout)
        try:
            conn.request("POST", path, _envelope(0, dumps(msg)), self._headers("application/connect+json", timeout))
            resp = conn.getresponse()
        except socket.timeout as e:
            conn.close()
            raise errors.DeadlineExceeded(f"{path}: no answer within {self.timeout:g}s") from e
        except (OSError, http.client.HTTPException) as e:
            conn.close()
            raise errors.Unavailable(f"{path}: {e}") from e
        if resp.status != 200:
            data = resp.read()
            conn.close()
            raise _error_of(resp.status, data)
        # The stream may be silent for a long time (no job to assign): only the caller's timeout bounds it.
        conn.sock.settimeout(timeout)
        conn.sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
        return ServerStream(path, conn, resp)


def _envelope(flags: int, data: bytes) -> bytes:
    return struct.pack(">BI", flags, len(data)) + data


def _error_of(status: int, data: bytes) -> errors.JqError:
    try:
        e = json.loads(data)
        return errors.from_code(e.get("code", "unknown"), e.get("message", ""))
    except (ValueError, AttributeError):
        return errors.from_http_status(status, f"HTTP {status}: {data[:200]!r}")


class ServerStream:
    """The messages of a server stream. ``close()`` may be called from any thread: a blocked iteration
    then ends with :class:`jqsdk.Canceled`."""

    def __init__(self, path, conn, resp):
        self._path, self._conn, self._resp = path, conn, resp
        self._closed = threading.Event()

    def __iter__(self) -> Iterator[dict]:
        try:
            while True:
                head = self._read(5)
                if head is None:
                    raise errors.Unavailable(f"{self._path}: stream ended without its end message")
                flags, n = struct.unpack(">BI", head)
                if n > _MAX_MESSAGE:
                    raise errors.ResourceExhausted(f"{self._path}: message of {n} bytes")
                data = self._read(n) if n else b""
                if data is None:
                    raise errors.Unavailable(f"{self._path}: stream cut inside a message")
                if flags & _END_STREAM:
                    end = json.loads(data) if data else {}
                    err = end.get("error")
                    if err:
                        raise errors.from_code(err.get("code", "unknown"), err.get("message", ""))
                    return
                yield loads(data)
        finally:
            self.close()

    def _read(self, n: int) -> bytes | None:
        buf = b""
        try:
            while len(buf) < n:
                chunk = self._resp.read(n - len(buf))
                if not chunk:
                    break
                buf += chunk
        except socket.timeout as e:
            raise errors.DeadlineExceeded(f"{self._path}: stream silent past its timeout") from e
        except (OSError, http.client.HTTPException, ValueError, AttributeError) as e:
            if self._closed.is_set():
                raise errors.Canceled(f"{self._path}: stream closed") from e
            raise errors.Unavailable(f"{self._path}: {e}") from e
        if self._closed.is_set():
            raise errors.Canceled(f"{self._path}: stream closed")
        if len(buf) < n:
            return None
        return buf

    def close(self) -> None:
        if self._closed.is_set():
            return
        self._closed.set()
        sock = self._conn.sock
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        self._resp.close()
        self._conn.close()
