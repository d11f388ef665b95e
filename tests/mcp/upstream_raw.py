"""A hand-written JSON-RPC upstream over stdio whose results an SDK server would never
send (QA qa-mcp7, #25): ``count`` declares an ``outputSchema`` (``{"n": integer}``) and
answers ``structuredContent`` by its argument ``x``: ``good`` -> ``{"n": 5}``, ``bad``
-> ``{"n": "five"}``, ``none`` -> none at all. Calls are appended to $UPSTREAM_LOG.
"""

from __future__ import annotations

import json
import os
import sys

TOOLS = [{"name": "count", "description": "count", "inputSchema": {
    "type": "object", "properties": {"x": {"type": "string"}}},
    "outputSchema": {"type": "object", "properties": {"n": {"type": "integer"}},
                     "required": ["n"]}}]
OUT = {"good": {"n": 5}, "bad": {"n": "five"}}


def send(obj: object) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


for line in sys.stdin:
    m = json.loads(line)
    mid, meth = m.get("id"), m.get("method")
    if mid is None:
        continue
    if meth == "initialize":
        send({"jsonrpc": "2.0", "id": mid, "result": {
            "protocolVersion": m["params"]["protocolVersion"], "capabilities": {"tools": {}},
            "serverInfo": {"name": "raw", "version": "0"}}})
    elif meth == "tools/list":
        send({"jsonrpc": "2.0", "id": mid, "result": {"tools": TOOLS}})
    elif meth == "tools/call":
        x = (m["params"].get("arguments") or {}).get("x", "")
        with open(os.environ["UPSTREAM_LOG"], "a", encoding="utf-8") as f:
            f.write(json.dumps({"tool": "count", "args": {"x": x}}) + "\n")
        result: dict[str, object] = {"content": [{"type": "text", "text": f"counted {x}"}]}
        if x in OUT:
            result["structuredContent"] = OUT[x]
        send({"jsonrpc": "2.0", "id": mid, "result": result})
    else:
        send({"jsonrpc": "2.0", "id": mid, "error": {"code": -32601, "message": "nope"}})
