"""A streamable-HTTP MCP upstream (standard library only) whose answers can be too big (#29).

Run: python upstream_big_http.py PORT. Stateless (no session id, no GET stream). Tools:
``big`` (``mb``: the answer's text in MiB, written in 1 MiB pieces; ``as``: ``json`` with
a content-length, ``chunked`` JSON without one, or ``sse``), ``noisy`` (an SSE answer: a
``notifications/message`` event of ``mb`` MiB first, then a small response) and
``small``. Each call appends ``{"tool", "pid"}`` to $UPSTREAM_LOG.
"""

from __future__ import annotations

import json
import os
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

TOOLS = [{"name": n, "description": n, "inputSchema": {"type": "object"}}
         for n in ("big", "noisy", "small")]
MIB = 1 << 20


def pieces(mb: float) -> list[bytes]:
    left, out = int(mb * MIB), []
    while left > 0:
        out.append(b"x" * min(MIB, left))
        left -= MIB
    return out


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: object) -> None:
        pass

    def _send(self, status: int, ctype: str, parts: list[bytes], *, chunked: bool = False
              ) -> None:
        self.send_response(status)
        self.send_header("content-type", ctype)
        if chunked:
            self.send_header("transfer-encoding", "chunked")
        else:
            self.send_header("content-length", str(sum(len(p) for p in parts)))
        self.end_headers()
        try:
            for p in parts:
                self.wfile.write(b"%x\r\n%s\r\n" % (len(p), p) if chunked else p)
            if chunked:
                self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except OSError:  # the gateway closed the connection: the answer was over its cap
            self.close_connection = True

    def do_GET(self) -> None:
        self._send(405, "text/plain", [b"no GET stream"])

    def do_DELETE(self) -> None:
        self._send(405, "text/plain", [b""])

    def do_POST(self) -> None:
        m = json.loads(self.rfile.read(int(self.headers["content-length"])))
        mid, meth, params = m.get("id"), m.get("method"), m.get("params") or {}
        if mid is None:
            self._send(202, "application/json", [])
            return
        if meth == "initialize":
            res = {"protocolVersion": params["protocolVersion"],
                   "capabilities": {"tools": {}},
                   "serverInfo": {"name": "big-http", "version": "0"}}
        elif meth == "tools/list":
            res = {"tools": TOOLS}
        elif meth == "tools/call":
            self._call(mid, params["name"], params.get("arguments") or {})
            return
        else:
            self._send(200, "application/json", [json.dumps({
                "jsonrpc": "2.0", "id": mid, "error": {"code": -32601, "message": "no"}})
                .encode()])
            return
        self._send(200, "application/json", [json.dumps({
            "jsonrpc": "2.0", "id": mid, "result": res}).encode()])

    def _call(self, mid: object, name: str, args: dict[str, object]) -> None:
        with open(os.environ["UPSTREAM_LOG"], "a", encoding="utf-8") as f:
            f.write(json.dumps({"tool": name, "pid": os.getpid()}) + "\n")
        rid = json.dumps(mid).encode()
        small = b'{"jsonrpc": "2.0", "id": ' + rid + b', "result": {"content": [' \
            b'{"type": "text", "text": "' + name.encode() + b' ok"}]}}'
        mb = float(str(args.get("mb", 1)))
        if name == "big":
            body = [b'{"jsonrpc": "2.0", "id": ' + rid + b', "result": {"content": ['
                    b'{"type": "text", "text": "', *pieces(mb), b'"}]}}']
            how = args.get("as", "json")
            if how == "sse":
                self._send(200, "text/event-stream",
                           [b"event: message\ndata: ", *body, b"\n\n"], chunked=True)
            else:
                self._send(200, "application/json", body, chunked=how == "chunked")
            return
        if name == "noisy":
            note = [b'event: message\ndata: {"jsonrpc": "2.0", "method": '
                    b'"notifications/message", "params": {"level": "info", "data": "',
                    *pieces(mb), b'"}}\n\n']
            self._send(200, "text/event-stream",
                       [*note, b"event: message\ndata: " + small + b"\n\n"], chunked=True)
            return
        self._send(200, "application/json", [small])


if __name__ == "__main__":
    ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Handler).serve_forever()
