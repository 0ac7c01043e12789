"""The JSON form of bytes fields, decoded without a server."""

import base64
import unittest

from base import jqsdk  # noqa: F401 - puts the package on the path
from jqsdk import _wire


class WireTest(unittest.TestCase):
    def test_bytes_fields_as_json_values_keep_their_text(self):
        text = ('{"job": {"payload": {"a": 1,  "b": [1, {"payload": "x"}]}, "labels": {"k": "v"}},'
                ' "list": [{"data": [1, 2 ,3]}, {"data": 12.50}, {"data": true}], "n": 3}')
        m = _wire.loads(text.encode())
        self.assertEqual(m["job"]["payload"], b'{"a": 1,  "b": [1, {"payload": "x"}]}')
        self.assertEqual([x["data"] for x in m["list"]], [b"[1, 2 ,3]", b"12.50", b"true"])
        self.assertEqual(m["job"]["labels"], {"k": "v"})
        self.assertEqual(m["n"], 3)

    def test_base64_and_plain_messages(self):
        m = _wire.loads(b'{"payload": "aGk=", "x": [1, 2]}')  # the fast path: strings stay strings
        self.assertEqual(_wire.bytes_value(m["payload"]), b"hi")
        self.assertEqual(m["x"], [1, 2])
        self.assertEqual(_wire.bytes_field(b"\x00\xff"), base64.b64encode(b"\x00\xff").decode())
        self.assertEqual(_wire.bytes_field({"a": 1}), {"a": 1})

    def test_durations(self):
        self.assertEqual(_wire.duration(1.5), "1.5s")
        self.assertEqual(_wire.duration(2), "2s")
        self.assertEqual(_wire.duration(0.000001), "0.000001s")
        self.assertEqual(_wire.parse_duration("0.250s"), 0.25)


if __name__ == "__main__":
    unittest.main()
