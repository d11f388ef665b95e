"""A streamable-HTTP MCP upstream whose ``tools/call`` answers are encoded oddly (#29).

Used by tests/mcp/test_gateway_coded_answers.py and the bad-input sweep's round 8.
``python upstream_coded_http.py PORT MODE``: the answer to every call of ``big`` (``mb``:
its text in MiB) is sent as ``MODE`` says: ``gzip`` / ``deflate`` / ``gzip-sse`` (the
body compressed, ``content-encoding`` set), ``gzip-bomb`` (a 256 MiB text gzipped),
``gzip-lie`` (the header, a plain body), ``br-fake`` (``br`` and random bytes),
``identity`` (the header, a plain body), ``len-short`` / ``len-long`` (a
``content-length`` smaller or larger than the body), ``two-codings`` (``gzip, gzip``).
Built on tests/mcp/upstream_big_http.py (standard library only); ``small`` answers
plainly. Each request's ``accept-encoding`` is appended to $UPSTREAM_LOG.
"""

from __future__ import annotations

import gzip
import json
import os
import sys
import zlib
from http.server import ThreadingHTTPServer
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import upstream_big_http as base

MODE = sys.argv[2] if len(sys.argv) > 2 else "gzip"


def _bomb(rid: bytes) -> bytes:
    z = zlib.compressobj(9, zlib.DEFLATED, 31)  # ~250 KiB on the wire: under a 1 MiB cap
    out = [z.compress(b'{"jsonrpc": "2.0", "id": ' + rid + b', "result": {"content": '
                      b'[{"type": "text", "text": "')]
    block = b"x" * (1 << 20)
    out += [z.compress(block) for _ in range(256)]
    out.append(z.compress(b'"}]}}') + z.flush())
    return b"".join(out)


class Handler(base.Handler):
    """:class:`upstream_big_http.Handler` with ``big`` answered as :data:`MODE` says."""

    def _call(self, mid: object, name: str, args: dict[str, object]) -> None:
        with open(os.environ["UPSTREAM_LOG"], "a", encoding="utf-8") as f:
            f.write(json.dumps({"tool": name, "accept-encoding":
                                self.headers.get("accept-encoding")}) + "\n")
        if name != "big":
            super()._call(mid, name, args)
            return
        rid = json.dumps(mid).encode()
        text = b"x" * int(float(str(args.get("mb", 1))) * base.MIB)
        body = b'{"jsonrpc": "2.0", "id": ' + rid + b', "result": {"content": [' \
            b'{"type": "text", "text": "' + text + b'"}]}}'
        ctype, coding, data, length = "application/json", "", body, None
        if MODE in ("gzip", "gzip-sse", "two-codings"):
            if MODE == "gzip-sse":
                ctype, body = "text/event-stream", b"event: message\ndata: " + body + b"\n\n"
            coding, data = "gzip", gzip.compress(body)
            if MODE == "two-codings":
                coding, data = "gzip, gzip", gzip.compress(data)
        elif MODE == "deflate":
            coding, data = "deflate", zlib.compress(body)
        elif MODE == "gzip-bomb":
            coding, data = "gzip", _bomb(rid)
        elif MODE == "gzip-lie":
            coding = "gzip"
        elif MODE == "br-fake":
            coding, data = "br", os.urandom(4096)
        elif MODE == "identity":
            coding = "identity"
        elif MODE == "len-short":
            length = max(len(body) // 2, 1)
        elif MODE == "len-long":
            length = len(body) + 1000
        self.send_response(200)
        self.send_header("content-type", ctype)
        if coding:
            self.send_header("content-encoding", coding)
        self.send_header("content-length", str(length if length is not None else len(data)))
        self.end_headers()
        try:
            self.wfile.write(data)
            self.wfile.flush()
        except OSError:
            pass
        if MODE in ("len-short", "len-long"):
            self.close_connection = True


if __name__ == "__main__":
    ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Handler).serve_forever()
