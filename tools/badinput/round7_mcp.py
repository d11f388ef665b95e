r"""Round 7's MCP family (issue 29): tool arguments as the upstream tool sees them.

``mcp-args``: a real stdio gateway in front of a small upstream that logs every
``tools/call`` it receives. A client reads the facts a protected ``book`` depends on
(``memo://price``, ``fact://plan/{city}``), calls it with arguments written as raw JSON
text (``\\u``-escaped keys and values, a key given twice once unescaped, non-NFC and
NFD/NFC-equal city names, zero-width and bidi characters, lone surrogates, NULs; numbers
past 2**53 and 2**64, 4301 digits, ``1e400``, ``NaN``, ``-0``, ``-0.0``, ``1E+2``,
subnormals), and again once the upstream's price moved (now stale: it must not be
forwarded). The gateway must answer JSON-RPC in time; a forwarded call's
arguments as the upstream parsed them must be the ones the gateway judged and
recorded; its trace must audit.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import yaml

from .cases import Builder, Case
from .round5 import _DRIVER as _R5

_UPSTREAM = r'''
import json, os, sys
LOG = os.path.join(os.path.dirname(os.path.abspath(__file__)), "calls.log")
TOOLS = [
    {"name": "book", "description": "Book.", "inputSchema": {"type": "object", "properties": {
        "city": {"type": "string"}, "price": {"type": "number"}}, "required": ["city"]}},
    {"name": "set_price", "description": "Set.", "inputSchema": {"type": "object",
        "properties": {"value": {"type": "string"}}, "required": ["value"]}}]
def out(rid, result):
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": rid, "result": result}) + "\n")
    sys.stdout.flush()
for line in sys.stdin.buffer:
    try:
        msg = json.loads(line)
    except ValueError:
        continue
    if not isinstance(msg, dict) or "id" not in msg:
        continue
    m, p = msg.get("method"), msg.get("params") or {}
    if m == "initialize":
        out(msg["id"], {"protocolVersion": p.get("protocolVersion", "2025-06-18"),
                        "serverInfo": {"name": "log", "version": "1"},
                        "capabilities": {"tools": {}, "resources": {}}})
    elif m == "tools/list":
        out(msg["id"], {"tools": TOOLS})
    elif m == "resources/list":
        out(msg["id"], {"resources": [{"uri": "memo://price", "name": "price"}]})
    elif m == "resources/read":  # the price moves once a book call arrived
        moved = os.path.isfile(LOG) and b'"book"' in open(LOG, "rb").read()
        out(msg["id"], {"contents": [{"uri": p.get("uri"), "mimeType": "text/plain",
                                      "text": "200" if moved else "100"}]})
    elif m == "tools/call":
        # the raw line, as this tool received it (json.loads decides what it means)
        with open(LOG, "ab") as f:
            f.write(line.rstrip(b"\n") + b"\n")
        out(msg["id"], {"content": [{"type": "text", "text": "done"}], "isError": False})
    else:
        out(msg["id"], {})
'''

_DRIVER = _R5[:_R5.index("reqs = [")] + r'''
sys.set_int_max_str_digits(0)
raw_args = sys.argv[3]
d = os.path.dirname(man)
def send_raw(text):
    try:
        p.stdin.write(text.encode("utf-8", "surrogatepass") + b"\n"); p.stdin.flush()
    except (BrokenPipeError, OSError):
        pass
def calls():
    log = os.path.join(d, "calls.log")
    if not os.path.isfile(log):
        return []
    return [json.loads(x)["params"] for x in open(log, "rb").read().splitlines() if x]
def typed(v):
    if isinstance(v, dict):
        return {k: typed(x) for k, x in sorted(v.items())}
    if isinstance(v, list):
        return [typed(x) for x in v]
    if isinstance(v, float):
        return ("float", repr(v))
    return (type(v).__name__, v)
n = 0
def req(method, params_text):
    global n
    n += 1
    send_raw('{"jsonrpc": "2.0", "id": %d, "method": "%s", "params": %s}'
             % (n, method, params_text))
    msg = answer(n, 90 if n == 1 else 40)
    if msg is None:
        print(f"CLOSED at request {n} ({method})"); fin(9)
    return msg
req("initialize", json.dumps({"protocolVersion": "2025-06-18", "capabilities": {},
                              "clientInfo": {"name": "sweep", "version": "1"}}))
send_raw('{"jsonrpc": "2.0", "method": "notifications/initialized"}')
req("tools/list", "{}")
for uri in ("memo://price", "fact://plan/budget", "fact://plan/Porto", "fact://plan/Z\u00fcrich"):
    req("resources/read", json.dumps({"uri": uri}))
call = '{"name": "book", "arguments": %s}' % raw_args
first = req("tools/call", call)
print("FIRST", json.dumps(first)[:400])
stale_ok = True  # the upstream's price moved with the first book call: the client's read is stale
second = req("tools/call", call)
print("SECOND", json.dumps(second)[:400])
books = [c for c in calls() if c.get("name") == "book"]
if stale_ok and len(books) > 1:
    print("ACCEPTED a stale book call was forwarded:", books); fin(10)
if books:
    seen = books[0].get("arguments")
    rows = [json.loads(x) for x in open(trace, encoding="utf-8", errors="surrogatepass")
            if x.strip()] if os.path.isfile(trace) else []
    judged = [r.get("args") for r in rows if isinstance(r, dict) and r.get("tool") == "book"
              and "args" in r and r.get("kind") in ("tool_output", "tool_call")]
    if not judged:
        print("NOTE no recorded args for book in the trace")
    elif typed(judged[0]) != typed(seen):
        print("MISMATCH the upstream saw", repr(seen)[:200], "the gateway recorded",
              repr(judged[0])[:200]); fin(11)
    city = seen.get("city") if isinstance(seen, dict) else None
    if isinstance(city, str) and city not in ("Porto", "Z\u00fcrich"):
        print("ACCEPTED book forwarded for a city whose fact was never read:", ascii(city))
        fin(10)
fin(0)
'''

_ARGS: dict[str, str] = {
    # unicode and escapes
    "plain": '{"city": "Porto", "price": 120}',
    "esc-key": '{"\\u0063ity": "Porto", "price": 120}',
    "esc-value": '{"city": "P\\u006frto", "price": 120}',
    "esc-all": '{"\\u0063\\u0069\\u0074\\u0079": "\\u0050\\u006f\\u0072\\u0074\\u006f", '
               '"price": 120}',
    "nfc": '{"city": "Z\u00fcrich", "price": 120}',
    "nfc-escaped": '{"city": "Z\\u00fcrich", "price": 120}',
    "nfd": '{"city": "Zu\u0308rich", "price": 120}',
    "nfd-escaped": '{"city": "Zu\\u0308rich", "price": 120}',
    "dup-key": '{"city": "Lisbon", "city": "Porto", "price": 120}',
    "dup-key-escaped": '{"city": "Lisbon", "\\u0063ity": "Porto", "price": 120}',
    "dup-key-escaped-first": '{"\\u0063ity": "Porto", "city": "Lisbon", "price": 120}',
    "key-nfc-nfd-both": '{"city": "Porto", "price": 120, "caf\\u00e9": 1, "cafe\\u0301": 2}',
    "lone-surrogate": '{"city": "\\ud800", "price": 120}',
    "lone-surrogate-key": '{"city": "Porto", "price": 120, "\\udfff": 1}',
    "surrogate-pair": '{"city": "Porto\\ud83d\\ude00", "price": 120}',
    "nul": '{"city": "Por\\u0000to", "price": 120}',
    "nul-key": '{"city": "Porto", "price": 120, "\\u0000": 1}',
    "fullwidth": '{"city": "\uff30\uff4f\uff52\uff54\uff4f", "price": 120}',
    "zero-width": '{"city": "Por\\u200bto", "price": 120}',
    "bidi": '{"city": "\\u202eotroP", "price": 120}',
    "bom-in-value": '{"city": "\\ufeffPorto", "price": 120}',
    "slash-escaped": '{"city": "Porto\\/x", "price": 120}',
    "glob-escaped": '{"city": "P\\u002a", "price": 120}',
    "empty-key": '{"": "Porto", "city": "Porto", "price": 120}',
    # numbers
    "2^53+1": '{"city": "Porto", "price": 9007199254740993}',
    "2^64": '{"city": "Porto", "price": 18446744073709551616}',
    "4301-digits": '{"city": "Porto", "price": ' + "9" * 4301 + "}",
    "1e400": '{"city": "Porto", "price": 1e400}',
    "-1e400": '{"city": "Porto", "price": -1e400}',
    "NaN": '{"city": "Porto", "price": NaN}',
    "Infinity": '{"city": "Porto", "price": Infinity}',
    "-0": '{"city": "Porto", "price": -0}',
    "-0.0": '{"city": "Porto", "price": -0.0}',
    "1E+2": '{"city": "Porto", "price": 1E+2}',
    "120.0": '{"city": "Porto", "price": 120.0}',
    "subnormal": '{"city": "Porto", "price": 5e-324}',
    "1e-400": '{"city": "Porto", "price": 1e-400}',
    "many-digits-float": '{"city": "Porto", "price": 120.00000000000000000001}',
    "nested-big": '{"city": "Porto", "price": 1, "x": [18446744073709551616, -0.0]}',
}


def _manifest(d: Path) -> Path:
    (d / "up.py").write_text(_UPSTREAM)
    doc: dict[str, Any] = {
        "name": "gw", "upstreams": {"u": {"command": sys.executable, "args": ["up.py"],
                                          "cwd": ".", "timeout_s": 20}},
        "store": {"backend": "sqlite", "path": "facts"}, "owners": {"memo://*": "u"},
        "facts": {"owners": {"fact://plan/*": "planner"},
                  "initial": {"fact://plan/budget": 150, "fact://plan/Porto": 1,
                              "fact://plan/Z\u00fcrich": 1}},
        "tools": {"book": {"depends_on": ["memo://price", "fact://plan/{city}"]},
                  "set_price": {"depends_on": ["fact://plan/budget"],
                                "writes": ["memo://price"]}},
        "trace": "trace.jsonl"}
    man = d / "gw.yaml"
    man.write_text(yaml.safe_dump(doc, allow_unicode=True), encoding="utf-8")
    (d / "drive.py").write_text(_DRIVER)
    return man


def mcp_args(b: Builder, per_seed: int = 25) -> None:
    """``book`` called through a real gateway with escaped, non-NFC and big-number args."""
    for name in sorted(b.rng.sample(sorted(_ARGS), min(per_seed, len(_ARGS)))):
        cid = f"mcpargs/{name}"
        d = b._dir(cid)
        (d / "keep.txt").write_text("the user's own file\n")
        man = _manifest(d)
        drv = d / "drive.py"
        code = (f"import runpy, sys; sys.argv = [{str(drv)!r}, {str(man)!r}, "
                f"{str(d / 'trace.jsonl')!r}, {_ARGS[name]!r}]; "
                f"runpy.run_path({str(drv)!r}, run_name='__main__')")
        b.cases.append(Case(cid, "mcp-args", ["PY", code], inputs=[man, d / "keep.txt"],
                            names=[], timeout=300, ok_codes=(0,)))
    _ = json


__all__ = ["mcp_args"]
