"""An 'MCP' upstream over HTTP (stdlib only) whose answers to some tools are garbage.

``python upstream_garbage.py PORT``. Tools: ``ok`` (a result), ``refuse`` (a well-formed
JSON-RPC error, HTTP 200), ``refuse500`` (the same with HTTP 500), ``not_json`` (a 200
that is no JSON), ``empty_body`` (a 200 with no body), ``wrong_shape`` (a result that
fits no ``CallToolResult``), ``html500`` (HTTP 500, an HTML page), ``set_read_mode``
(how ``resources/read`` of ``g://seats`` answers from now: ``ok``, ``not_json``,
``wrong_shape``, ``html500``). Every ``tools/call`` it gets is appended to the file
``GARBAGE_LOG`` names (one JSON line), if set.
"""

from __future__ import annotations

import json
import os
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

STATE = {"read_mode": "ok"}
NAMES = ("ok", "refuse", "refuse500", "not_json", "empty_body", "wrong_shape", "html500",
         "set_read_mode")
TOOLS = [{"name": n, "inputSchema": {"type": "object", "properties": {
    "route": {"type": "string"}}}} for n in NAMES]


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a: Any) -> None:
        pass

    def send(self, code: int, body: bytes | str, ctype: str = "application/json") -> None:
        b = body if isinstance(body, bytes) else body.encode()
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(b)))
        self.send_header("Mcp-Session-Id", "s1")
        self.end_headers()
        self.wfile.write(b)

    def do_GET(self) -> None:
        self.send(405, b"")

    def do_DELETE(self) -> None:
        self.send(200, b"")

    def do_POST(self) -> None:
        msg = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
        m, i, p = msg.get("method"), msg.get("id"), msg.get("params") or {}

        def ok(r: Any) -> None:
            self.send(200, json.dumps({"jsonrpc": "2.0", "id": i, "result": r}))

        def err(code: int, status: int = 200) -> None:
            self.send(status, json.dumps({"jsonrpc": "2.0", "id": i, "error": {
                "code": code, "message": "no such route"}}))

        if i is None:
            return self.send(202, b"")
        if m == "initialize":
            return ok({"protocolVersion": "2025-06-18", "capabilities": {
                "tools": {}, "resources": {}}, "serverInfo": {"name": "garbage", "version": "0"}})
        if m == "tools/list":
            return ok({"tools": TOOLS})
        if m == "resources/list":
            return ok({"resources": [{"uri": "g://seats", "name": "seats"}]})
        if m == "resources/templates/list":
            return ok({"resourceTemplates": []})
        if m == "prompts/list":
            return ok({"prompts": []})
        if m == "resources/read":
            mode = STATE["read_mode"]
            if mode == "not_json":
                return self.send(200, b"<<garbage>>")
            if mode == "wrong_shape":
                return ok({"contents": "seats=5"})
            if mode == "html500":
                return self.send(500, b"<html>oops</html>", "text/html")
            return ok({"contents": [{"uri": "g://seats", "text": "5"}]})
        if m != "tools/call":
            return err(-32601)
        n, a = p.get("name"), p.get("arguments") or {}
        if (log := os.environ.get("GARBAGE_LOG")):
            with open(log, "a", encoding="utf-8") as f:
                f.write(json.dumps({"tool": n, "args": a}) + "\n")
        if n == "ok":
            return ok({"content": [{"type": "text", "text": "done"}]})
        if n == "set_read_mode":
            STATE["read_mode"] = a.get("route", "ok")
            return ok({"content": [{"type": "text", "text": STATE["read_mode"]}]})
        if n == "refuse":
            return err(-32602)
        if n == "refuse500":
            return err(-32603, 500)
        if n == "not_json":
            return self.send(200, b"\x00\xffnot json at all")
        if n == "empty_body":
            return self.send(200, b"")
        if n == "wrong_shape":
            return ok({"content": "just a string", "isError": "maybe"})
        if n == "html500":
            return self.send(500, b"<html>Internal Server Error</html>", "text/html")
        return err(-32601)


if __name__ == "__main__":
    ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Handler).serve_forever()
