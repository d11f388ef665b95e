"""A stdio MCP upstream (standard library only) whose answers can be far too big (#29).

Tools: ``big`` (arguments ``mb``: the answer's text in MiB, written in 1 MiB pieces so
the upstream itself stays small; ``id_at``: where the response's ``id`` is, ``head``,
``tail`` or ``middle``), ``noisy`` (a ``notifications/message`` of ``mb`` MiB first, then
a small answer), ``nonutf8`` (a stray line on stdout, then an answer holding bytes
that are no UTF-8) and ``small``. Each call appends ``{"tool", "pid"}`` to $UPSTREAM_LOG.
"""

from __future__ import annotations

import json
import os
import sys

TOOLS = [{"name": n, "description": n, "inputSchema": {"type": "object"}}
         for n in ("big", "noisy", "nonutf8", "small")]
MIB = 1 << 20
out = sys.stdout.buffer


def send(obj: object) -> None:
    out.write(json.dumps(obj).encode() + b"\n")
    out.flush()


def text_of(mb: float) -> None:
    left = int(mb * MIB)
    while left > 0:
        out.write(b"x" * min(MIB, left))
        left -= MIB


def big(mid: object, mb: float, id_at: str) -> None:
    rid = json.dumps(mid).encode()
    head = {"head": b'{"jsonrpc": "2.0", "id": ' + rid + b', "result": ',
            "tail": b'{"result": ', "middle": b'{"jsonrpc": "2.0", "result": '}[id_at]
    out.write(head + b'{"content": [{"type": "text", "text": "')
    text_of(mb)
    out.write(b'"}]}')
    out.write({"head": b"}", "tail": b', "id": ' + rid + b', "jsonrpc": "2.0"}',
               "middle": b', "id": ' + rid + b', "x": 1}'}[id_at] + b"\n")
    out.flush()


def handshake(meth: str, params: dict[str, object]) -> object:
    """The result of ``initialize`` or ``tools/list``; None for another method."""
    return {"initialize": lambda: {"protocolVersion": params["protocolVersion"],
                                   "capabilities": {"tools": {}},
                                   "serverInfo": {"name": "big", "version": "0"}},
            "tools/list": lambda: {"tools": TOOLS}}.get(meth, lambda: None)()


for line in sys.stdin:
    m = json.loads(line)
    mid, meth = m.get("id"), m.get("method")
    if mid is None:
        continue
    if (res := handshake(meth, m.get("params") or {})) is not None:
        send({"jsonrpc": "2.0", "id": mid, "result": res})
    elif meth == "tools/call":
        name, args = m["params"]["name"], m["params"].get("arguments") or {}
        with open(os.environ["UPSTREAM_LOG"], "a", encoding="utf-8") as f:
            f.write(json.dumps({"tool": name, "pid": os.getpid()}) + "\n")
        if name == "big":
            big(mid, float(args.get("mb", 1)), str(args.get("id_at", "head")))
            continue
        if name == "nonutf8":
            out.write(b"debug: a print on stdout\n")
            out.write(b'{"jsonrpc": "2.0", "id": ' + json.dumps(mid).encode() +
                      b', "result": {"content": [{"type": "text", "text": "\xff\xfe"}]}}\n')
            out.flush()
            continue
        if name == "noisy":
            out.write(b'{"jsonrpc": "2.0", "method": "notifications/message", "params": '
                      b'{"level": "info", "data": "')
            text_of(float(args.get("mb", 1)))
            out.write(b'"}}\n')
        send({"jsonrpc": "2.0", "id": mid, "result": {
            "content": [{"type": "text", "text": f"{name} ok"}]}})
    else:
        send({"jsonrpc": "2.0", "id": mid, "error": {"code": -32601, "message": "nope"}})
