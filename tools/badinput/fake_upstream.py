"""A stdio MCP upstream that misbehaves on purpose (issue 29, fifth sweep round).

``python fake_upstream.py MODE`` answers JSON-RPC lines like a small MCP server (tools
``book``, ``set_price``, ``weather``; resources ``memo://price`` and ``memo://city``) until
the request named by ``MODE = METHOD:BEHAVIOUR`` arrives, which gets the behaviour instead
of a good answer: ``garbage`` (a line that is no JSON), ``nonutf8`` (bytes that are no
UTF-8), ``wrong-id``, ``no-jsonrpc``, ``result-list``, ``error-string``, ``error-odd``
(an error whose code is a string and message a number), ``huge`` (a 40 MB answer),
``deep`` (a 100,000-deep nesting), ``nan`` (a ``NaN`` token), ``twice`` (the answer
sent two times), ``exit`` (the process exits), ``hang`` (never answers), ``null-id``,
``stdout-close`` (closes stdout, keeps running), ``schema-*`` (odd ``tools/list`` schemas),
``progress-*`` (``notifications/progress`` with odd tokens or values before or after the
answer, round 10: :data:`PROGRESS`).
Only the standard library: the gateway's upstream is any program.
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any

TOOLS: list[dict[str, Any]] = [
    {"name": "book", "description": "Book.", "inputSchema": {
        "type": "object", "properties": {"city": {"type": "string"},
                                         "price": {"type": "integer"}},
        "required": ["city", "price"]}},
    {"name": "set_price", "description": "Set.", "inputSchema": {
        "type": "object", "properties": {"value": {"type": "string"}}, "required": ["value"]}},
    {"name": "weather", "description": "Weather.", "inputSchema": {
        "type": "object", "properties": {"city": {"type": "string"}}}},
]

SCHEMAS: dict[str, Any] = {
    "schema-null": [{**TOOLS[0], "inputSchema": None}, *TOOLS[1:]],
    "schema-string": [{**TOOLS[0], "inputSchema": "object"}, *TOOLS[1:]],
    "schema-props-list": [{**TOOLS[0], "inputSchema": {"type": "object",
                                                       "properties": [1, 2]}}, *TOOLS[1:]],
    "schema-required-str": [{**TOOLS[0], "inputSchema": {**TOOLS[0]["inputSchema"],
                                                         "required": "city"}}, *TOOLS[1:]],
    "schema-no-name": [{k: v for k, v in TOOLS[0].items() if k != "name"}, *TOOLS[1:]],
    "schema-name-int": [{**TOOLS[0], "name": 5}, *TOOLS[1:]],
    "schema-name-empty": [{**TOOLS[2], "name": ""}, *TOOLS[:2]],
    "schema-name-nul": [{**TOOLS[2], "name": "wea\u0000ther"}, *TOOLS[:2]],
    "schema-name-long": [{**TOOLS[2], "name": "w" * 10_000}, *TOOLS[:2]],
    "schema-dup": [*TOOLS, TOOLS[0], {**TOOLS[0], "description": "another book"}],
    "schema-many": [*TOOLS, *({"name": f"t{i}", "inputSchema": {"type": "object"}}
                              for i in range(20_000))],
    "schema-tools-dict": {"book": TOOLS[0]},
    "schema-tools-null": None,
    "schema-desc-obj": [{**TOOLS[0], "description": {"a": [1]}}, *TOOLS[1:]],
    "schema-deep": [{**TOOLS[0], "inputSchema": {"type": "object", "properties": {
        "city": json.loads("[" * 900 + "]" * 900)}}}, *TOOLS[1:]],
    "schema-surrogate": [{**TOOLS[2], "name": "w\udcffx"}, *TOOLS[:2]],
}


def _progress(token: Any, how: str) -> list[bytes]:
    """The ``notifications/progress`` lines of a ``progress-*`` behaviour (raw JSON text)."""
    def note(params: str) -> bytes:
        return b'{"jsonrpc": "2.0", "method": "notifications/progress", "params": ' + \
            params.encode("utf-8", "surrogatepass") + b"}\n"
    tok = json.dumps(token)
    return {
        "progress-echo": [note(f'{{"progressToken": {tok}, "progress": 1, "total": 2}}')],
        "progress-nan": [note(f'{{"progressToken": {tok}, "progress": NaN}}')],
        "progress-inf": [note(f'{{"progressToken": {tok}, "progress": 1e400}}')],
        "progress-str": [note(f'{{"progressToken": {tok}, "progress": "half"}}')],
        "progress-huge": [note(f'{{"progressToken": {tok}, "progress": 1, "message": '
                               f'"{"x" * (10 << 20)}"}}')],
        "progress-surrogate": [note(f'{{"progressToken": {tok}, "progress": 1, '
                                    '"message": "\\ud800"}')],
        "progress-unknown": [note('{"progressToken": "icore-progress-999999", '
                                  '"progress": 1}')],
        "progress-int-token": [note('{"progressToken": 1, "progress": 1}')],
        "progress-no-token": [note('{"progress": 1}')],
        "progress-params-list": [note("[1, 2]")],
        "progress-deep": [note(f'{{"progressToken": {tok}, "progress": 1, "message": '
                               + "[" * 50_000 + "]" * 50_000 + "}")],
        "progress-flood": [note(f'{{"progressToken": {tok}, "progress": {i}}}')
                           for i in range(5000)],
    }[how]


PROGRESS = ["progress-echo", "progress-nan", "progress-inf", "progress-str", "progress-huge",
            "progress-surrogate", "progress-unknown", "progress-int-token",
            "progress-no-token", "progress-params-list", "progress-deep", "progress-flood"]
"""The ``progress-*`` behaviours of ``tools/call`` (before the answer; ``after-`` too)."""


def _good(method: str, params: Any) -> Any:
    if method == "initialize":
        pv = params.get("protocolVersion", "2025-06-18") if isinstance(params, dict) else ""
        return {"protocolVersion": pv, "serverInfo": {"name": "fake", "version": "1"},
                "capabilities": {"tools": {}, "resources": {"subscribe": True}}}
    if method == "tools/list":
        return {"tools": TOOLS}
    if method == "resources/list":
        return {"resources": [{"uri": "memo://price", "name": "price"},
                              {"uri": "memo://city", "name": "city"}]}
    if method == "resources/read":
        uri = params.get("uri", "") if isinstance(params, dict) else ""
        return {"contents": [{"uri": uri, "mimeType": "text/plain", "text": "100"}]}
    if method == "tools/call":
        return {"content": [{"type": "text", "text": "done"}], "isError": False}
    return {}


def _out(data: bytes) -> None:
    sys.stdout.buffer.write(data)
    sys.stdout.buffer.flush()


def main() -> None:
    """Serve stdin until it closes."""
    mode = sys.argv[1] if len(sys.argv) > 1 else "none:none"
    target, _, how = mode.partition(":")
    for line in sys.stdin.buffer:
        try:
            msg = json.loads(line)
        except ValueError:
            continue
        if not isinstance(msg, dict) or "id" not in msg or "method" not in msg:
            continue
        rid, method = msg["id"], msg["method"]
        if method != target or (how.startswith("schema-") and method != "tools/list"):
            result = _good(method, msg.get("params"))
            if how.startswith("schema-") and method == "tools/list":
                result = {"tools": SCHEMAS[how]}
            text = json.dumps({"jsonrpc": "2.0", "id": rid, "result": result},
                              ensure_ascii=False)
            _out(text.encode("utf-8", "surrogatepass") + b"\n")
            continue
        good = {"jsonrpc": "2.0", "id": rid, "result": _good(method, msg.get("params"))}
        if how.removeprefix("after-").startswith("progress-"):
            meta = (msg.get("params") or {}).get("_meta") or {}
            lines = _progress(meta.get("progressToken", "none"), how.removeprefix("after-"))
            answer = json.dumps(good).encode() + b"\n"
            _out(answer + b"".join(lines) if how.startswith("after-") else
                 b"".join(lines) + answer)
        elif how == "garbage":
            _out(b"this is not JSON-RPC\n")
        elif how == "nonutf8":
            _out(b'{"jsonrpc": "2.0", "id": ' + json.dumps(rid).encode() +
                 b', "result": {"x": "\xff\xfe\xc0"}}\n')
        elif how == "wrong-id":
            _out(json.dumps({**good, "id": 10_000 + (rid if isinstance(rid, int) else 0)})
                 .encode() + b"\n")
        elif how == "no-jsonrpc":
            _out(json.dumps({"id": rid, "result": good["result"]}).encode() + b"\n")
        elif how == "result-list":
            _out(json.dumps({"jsonrpc": "2.0", "id": rid, "result": [1, 2]}).encode() + b"\n")
        elif how == "error-string":
            _out(json.dumps({"jsonrpc": "2.0", "id": rid, "error": "boom"}).encode() + b"\n")
        elif how == "error-odd":
            _out(json.dumps({"jsonrpc": "2.0", "id": rid, "error": {"code": "x",
                                                                   "message": 5}}).encode()
                 + b"\n")
        elif how == "huge":
            body = {"content": [{"type": "text", "text": "x" * (40 << 20)}]}
            if method != "tools/call":
                body = {**good["result"], "pad": "x" * (40 << 20)}
            _out(json.dumps({"jsonrpc": "2.0", "id": rid, "result": body}).encode() + b"\n")
        elif how == "deep":
            _out(b'{"jsonrpc": "2.0", "id": ' + json.dumps(rid).encode() + b', "result": ' +
                 b"[" * 100_000 + b"]" * 100_000 + b"}\n")
        elif how == "nan":
            _out(b'{"jsonrpc": "2.0", "id": ' + json.dumps(rid).encode() +
                 b', "result": {"content": [{"type": "text", "text": NaN}]}}\n')
        elif how == "twice":
            _out(json.dumps(good).encode() + b"\n" + json.dumps(good).encode() + b"\n")
        elif how == "null-id":
            _out(json.dumps({**good, "id": None}).encode() + b"\n")
        elif how == "exit":
            os._exit(0)
        elif how == "stdout-close":
            sys.stdout.close()
            os.close(1)
            time.sleep(120)
        elif how == "hang":
            time.sleep(600)


if __name__ == "__main__":
    main()
