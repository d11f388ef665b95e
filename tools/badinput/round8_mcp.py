r"""Round 8's gateway families (issue 29): questions forwarded, caps, manifest formats.

- ``elicit``: a real stdio gateway in front of an upstream whose tools ask the client
  (``ctx.elicit``, sampling) mid-call (tests/mcp/upstream_asks.py); a raw JSON-RPC
  client answers the forwarded question with an odd result (``approve`` as ``"true"``,
  ``1``, ``NaN``, 5000 digits; actions in capitals, numbers, missing; content a list, a
  string, 10 MB, 100,000 deep, a lone surrogate; an error, a wrong or string id, two
  answers, no answer past ``ask_timeout_s``). The call must end in time with a JSON-RPC
  answer, the gateway must live on, its trace must audit, and a human's answer may be
  recorded ``approve`` only for ``accept`` with every declared boolean ``true``.
- ``gw-values``: ``ask_timeout_s``, ``max_message_mb``, ``connect_timeout_s``,
  ``timeout_s`` and ``gate_timeout_s`` given odd values (0, negative, NaN, infinite, past
  their bound, strings, booleans, lists, 5000 digits, tiny), for stdio and URL upstreams.
- ``manifest-format``: gateway and run manifests written as JSON (duplicate keys, ``NaN``,
  ``1e400``, comments, a BOM, UTF-16, trailing commas), as TOML, as YAML named ``.json``,
  as JSON lines: each runs as its YAML twin would, or is refused naming the file.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import yaml

from . import seeds
from .cases import Builder, Case
from .round5 import _DRIVER as _R5
from .surfaces import _UPSTREAM, _gateway_doc

_REPO = Path(__file__).resolve().parents[2]
_ASKS = _REPO / "tests" / "mcp" / "upstream_asks.py"
BUDGET = "fact://plan/budget"

_DRIVER = _R5[:_R5.index("reqs = [")] + r'''
kind, answer_text, ask_s = sys.argv[3:6]
ask_s = float(ask_s)
sys.set_int_max_str_digits(0)
ASKED = []
def send_raw(text):
    try:
        p.stdin.write(text.encode("utf-8", "surrogatepass") + b"\n"); p.stdin.flush()
    except (BrokenPipeError, OSError):
        pass
def on_request(msg):
    """A question from the gateway: answered as the case says."""
    ASKED.append(msg.get("method"))
    rid = json.dumps(msg["id"])
    if answer_text == "NONE":
        return
    for part in answer_text.split("\n@@\n"):
        send_raw(part.replace("%ID%", rid).replace("%IDSTR%", json.dumps(str(msg["id"])))
                 .replace("%IDX%", json.dumps(msg["id"] + 1000 if isinstance(msg["id"], int)
                                              else "x")))
ON_REQUEST = on_request
fin5 = fin
def fin(code):
    """Round 5's end (stdin closed, exit code, audit) after this round's trace checks."""
    if code == 0 and os.path.isfile(trace):
        text = open(trace, "rb").read()
        for ln in text.splitlines():
            if ln.strip():
                try:
                    json.loads(ln, parse_constant=lambda c: (_ for _ in ()).throw(
                        ValueError(c)))
                except ValueError as e:
                    print("STRICT the gateway's trace is no strict JSON:", e, ln[:160])
                    code = 8
        for ln in text.splitlines():
            try:
                x = json.loads(ln)
            except ValueError:
                continue
            a = x.get("ask") if isinstance(x, dict) else None
            if isinstance(a, dict) and a.get("decision") == "approve" and not (
                    a.get("action") == "accept" and a.get("content") == {"approve": True}):
                print("ACCEPTED an answer recorded approve:", repr(a)[:300]); code = 10
    fin5(code)
n = 0
def req(method, params, limit=40):
    global n
    n += 1
    send_raw(json.dumps({"jsonrpc": "2.0", "id": n, "method": method, "params": params}))
    msg = answer(n, limit)
    if msg is None:
        print(f"CLOSED at request {n} ({method})"); fin(9)
    return msg
req("initialize", {"protocolVersion": "2025-06-18", "capabilities": {"elicitation": {},
    "sampling": {}}, "clientInfo": {"name": "sweep", "version": "1"}}, 90)
send_raw(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}))
req("tools/call", {"name": "icore_get_fact", "arguments": {"key": "fact://plan/budget"}})
tool, args = ("approve", {"amount": 5}) if kind == "elicit" else ("summarize", {"text": "hi"})
first = req("tools/call", {"name": tool, "arguments": args}, ask_s + 60)
print("ASKED", ASKED, "FIRST", json.dumps(first)[:400])
# the gateway goes on: a plain call after the odd answer
after = req("tools/call", {"name": "echo", "arguments": {"text": "still here"}}, 60)
if "still here" not in json.dumps(after):
    print("DEAD the gateway does not serve a plain call after the answer:",
          json.dumps(after)[:300]); fin(11)
fin(0)
'''

_OK = '{"jsonrpc": "2.0", "id": %ID%, "result": RESULT}'
_ELICIT: dict[str, str] = {
    "accept-true": '{"action": "accept", "content": {"approve": true}}',
    "accept-false": '{"action": "accept", "content": {"approve": false}}',
    "decline": '{"action": "decline"}',
    "cancel": '{"action": "cancel", "content": {"approve": true}}',
    "accept-str-true": '{"action": "accept", "content": {"approve": "true"}}',
    "accept-one": '{"action": "accept", "content": {"approve": 1}}',
    "accept-nan": '{"action": "accept", "content": {"approve": NaN}}',
    "accept-1e400": '{"action": "accept", "content": {"approve": 1e400}}',
    "accept-5000-digits": '{"action": "accept", "content": {"approve": ' + "9" * 5000 + "}}",
    "accept-null": '{"action": "accept", "content": null}',
    "accept-list": '{"action": "accept", "content": [true]}',
    "accept-string": '{"action": "accept", "content": "yes"}',
    "accept-extra": '{"action": "accept", "content": {"approve": true, "x": 1}}',
    "accept-dup-key": '{"action": "accept", "content": {"approve": false, "approve": true}}',
    "accept-esc-key": '{"action": "accept", "content": {"\\u0061pprove": true}}',
    "accept-surrogate-key": '{"action": "accept", "content": {"approve": true, "\\ud800": 1}}',
    "accept-huge": '{"action": "accept", "content": {"approve": true, "n": "' + "x" * (10 << 20)
                   + '"}}',
    "accept-deep": '{"action": "accept", "content": {"approve": ' + "[" * 100_000
                   + "]" * 100_000 + "}}",
    "action-upper": '{"action": "ACCEPT", "content": {"approve": true}}',
    "action-int": '{"action": 1, "content": {"approve": true}}',
    "action-null": '{"action": null, "content": {"approve": true}}',
    "action-missing": '{"content": {"approve": true}}',
    "result-list": "[1]",
    "result-null": "null",
}
_SAMPLE: dict[str, str] = {
    "good": '{"role": "assistant", "content": {"type": "text", "text": "short"}, "model": "m"}',
    "no-content": '{"role": "assistant", "model": "m"}',
    "text-int": '{"role": "assistant", "content": {"type": "text", "text": 5}, "model": "m"}',
    "role-odd": '{"role": "system", "content": {"type": "text", "text": "x"}, "model": "m"}',
    "content-list": '{"role": "assistant", "content": [{"type": "text", "text": "x"}], '
                    '"model": "m"}',
    "nan": '{"role": "assistant", "content": {"type": "text", "text": NaN}, "model": "m"}',
    "huge": '{"role": "assistant", "content": {"type": "text", "text": "' + "y" * (10 << 20)
            + '"}, "model": "m"}',
    "surrogate": '{"role": "assistant", "content": {"type": "text", "text": "\\udfff"}, '
                 '"model": "m"}',
}
_FRAMES: dict[str, str] = {
    # how the answer is sent: its JSON-RPC frame
    "ok": _OK,
    "error": '{"jsonrpc": "2.0", "id": %ID%, "error": {"code": -1, "message": "no"}}',
    "error-odd": '{"jsonrpc": "2.0", "id": %ID%, "error": "boom"}',
    "both": '{"jsonrpc": "2.0", "id": %ID%, "result": RESULT, "error": {"code": 1, '
            '"message": "x"}}',
    "wrong-id": '{"jsonrpc": "2.0", "id": %IDX%, "result": RESULT}',
    "string-id": '{"jsonrpc": "2.0", "id": %IDSTR%, "result": RESULT}',
    "null-id": '{"jsonrpc": "2.0", "id": null, "result": RESULT}',
    "twice": _OK + "\n@@\n" + _OK.replace("RESULT", '{"action": "decline"}'),
    "no-jsonrpc": '{"id": %ID%, "result": RESULT}',
    "garbage-first": "this is no JSON\n@@\n" + _OK,
    "none": "NONE",
}


def _asks_manifest(d: Path, ask_s: float) -> Path:
    doc: dict[str, Any] = {
        "name": "asks", "upstreams": {"asks": {"command": sys.executable,
                                               "args": [str(_ASKS)], "timeout_s": 20}},
        "facts": {"owners": {"fact://plan/*": "planner"}, "initial": {BUDGET: 100}},
        "tools": {"approve": {"depends_on": [BUDGET]}, "summarize": {"depends_on": [BUDGET]}},
        "ask_timeout_s": ask_s, "trace": "trace.jsonl"}
    man = d / "gw.yaml"
    man.write_text(yaml.safe_dump(doc), encoding="utf-8")
    return man


def elicit(b: Builder, work: Path, per_seed: int = 12) -> None:
    """Odd answers to a forwarded question (elicitation, sampling), through a real gateway."""
    drv = work / "round8-elicit.py"
    drv.write_text(_DRIVER)
    combos = [("elicit", r, "ok") for r in _ELICIT] + \
             [("elicit", "accept-true", f) for f in _FRAMES if f != "ok"] + \
             [("sample", r, "ok") for r in _SAMPLE] + \
             [("sample", "good", f) for f in ("error", "wrong-id", "none", "twice")]
    for kind, res, frame in sorted(b.rng.sample(combos, min(per_seed, len(combos)))):
        cid = f"elicit/{kind}/{res}/{frame}"
        d = b._dir(cid)
        ask_s = 3.0
        man = _asks_manifest(d, ask_s)
        results = _ELICIT if kind == "elicit" else _SAMPLE
        text = _FRAMES[frame].replace("RESULT", results[res])
        arg = d / "answer.txt"
        arg.write_text(text, encoding="utf-8")
        code = (f"import runpy, sys; sys.argv = [{str(drv)!r}, {str(man)!r}, "
                f"{str(d / 'trace.jsonl')!r}, {kind!r}, open({str(arg)!r}, encoding='utf-8')"
                f".read(), {str(ask_s)!r}]; runpy.run_path({str(drv)!r}, run_name='__main__')")
        b.cases.append(Case(cid, "elicit", ["PY", code], inputs=[man], names=[],
                            timeout=300, ok_codes=(0,)))


# ------------------------------------------------------------------------- http-upstream
_HTTP_DRIVER = r'''
import anyio, json, os, socket, subprocess, sys, time
import yaml
from mcp.client import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
d, mode, lean, fake = sys.argv[1:5]
s = socket.socket(); s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]; s.close()
up = subprocess.Popen([sys.executable, fake, str(port), mode],  # its own noise to a file
                      env={**os.environ, "UPSTREAM_LOG": os.path.join(d, "up.log")},
                      stdout=subprocess.DEVNULL, stderr=open(os.path.join(d, "up.err"), "wb"))
for _ in range(200):
    try:
        socket.create_connection(("127.0.0.1", port), 0.2).close(); break
    except OSError:
        time.sleep(0.1)
man = os.path.join(d, "gw.yaml"); trace = os.path.join(d, "trace.jsonl")
open(man, "w").write(yaml.safe_dump({
    "name": "enc", "upstreams": {"big": {"url": f"http://127.0.0.1:{port}/mcp",
                                         "timeout_s": 60}},
    "facts": {"owners": {"fact://plan/*": "planner"}, "initial": {"fact://plan/goal": 1}},
    "tools": {"big": {"depends_on": ["fact://plan/goal"]}}, "max_message_mb": 1,
    "trace": trace}))
code = 0
async def main():
    global code
    p = StdioServerParameters(command=sys.executable, args=["-m", "icore", "mcp", man],
                              env={**os.environ, "ICORE_MCP_LEAN": lean})
    async with stdio_client(p, errlog=open(man + ".err", "w")) as (r, w), \
            ClientSession(r, w) as s:
        await s.initialize()
        for mb in (0.25, 3):
            await s.read_resource("fact://plan/goal")
            with anyio.fail_after(150):
                res = await s.call_tool("big", {"mb": mb})
            t = "".join(getattr(c, "text", "") for c in res.content)
            print("CALL", mb, res.is_error, len(t), t[:300] if len(t) < 2000 else "")
            if not res.is_error and len(t) > (1 << 20):
                print("ACCEPTED an answer over max_message_mb reached the client:", len(t))
                code = 10
        with anyio.fail_after(60):
            res = await s.call_tool("small", {})
        if res.is_error:
            print("DEAD a plain call fails after the odd answers:", res.content); code = 11
try:
    anyio.run(main)
except TimeoutError:
    print("HANG a call was not answered in time"); code = 5
finally:
    up.kill(); up.wait()
print(open(man + ".err", encoding="utf-8", errors="replace").read()[-2000:])
if code == 0 and os.path.isfile(trace):
    for ln in open(trace, "rb").read().splitlines():
        if ln.strip():
            json.loads(ln, parse_constant=lambda c: (_ for _ in ()).throw(ValueError(c)))
    a = subprocess.run([sys.executable, "-m", "icore", "audit", trace, "--no-report"],
                       capture_output=True, text=True, timeout=120, errors="replace")
    print("AUDIT", a.returncode, a.stdout[-600:], a.stderr[-1500:])
    code = 0 if a.returncode in (0, 3) else 8
sys.exit(code)
'''
_ENCODINGS = ["gzip", "gzip-sse", "two-codings", "deflate", "gzip-bomb", "gzip-lie", "br-fake",
              "identity", "len-short", "len-long"]


def http_upstream(b: Builder, work: Path, per_seed: int = 6) -> None:
    """An HTTP upstream answering compressed or with a lying length (``max_message_mb``)."""
    drv = work / "round8-http.py"
    drv.write_text(_HTTP_DRIVER)
    fake = _REPO / "tests" / "mcp" / "upstream_coded_http.py"
    combos = [(m, lean) for m in _ENCODINGS for lean in ("1", "0")]
    for mode, lean in sorted(b.rng.sample(combos, min(per_seed, len(combos)))):
        cid = f"httpup/{mode}/{'lean' if lean == '1' else 'sdk'}"
        d = b._dir(cid)
        code = (f"import runpy, sys; sys.argv = [{str(drv)!r}, {str(d)!r}, {mode!r}, "
                f"{lean!r}, {str(fake)!r}]; runpy.run_path({str(drv)!r}, run_name='__main__')")
        b.cases.append(Case(cid, "http-upstream", ["PY", code], names=[], timeout=400,
                            ok_codes=(0,), refusal=True))


# ------------------------------------------------------------------------- gw-values
_NUMBERS: list[Any] = [0, -1, -0.0, float("nan"), float("inf"), 1e-9, 1e-300, 86_401,
                       10**6, 10**30, "5", "1e400", True, False, None, [1], {"a": 1}, "",
                       "\u0665", 2**63, 0.5]
_FIELDS = [("ask_timeout_s",), ("max_message_mb",), ("gate_timeout_s",),
           ("upstreams", "notes", "connect_timeout_s"), ("upstreams", "notes", "timeout_s"),
           ("upstreams", "web", "connect_timeout_s"), ("upstreams", "web", "timeout_s"),
           ("upstreams", "web", "max_message_mb"), ("upstreams", "notes", "max_message_mb"),
           ("upstreams", "notes", "ask_timeout_s")]


def _valid(field: tuple[str, ...], v: Any) -> bool:
    """Whether a value is a valid setting (the run may start: exit 0, 1 or 2)."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return False
    if field[-1] in ("max_message_mb", "ask_timeout_s") and len(field) > 1:
        return False  # not an upstream's field
    top = 86_400 if field[-1] == "ask_timeout_s" else float("inf")
    return v == v and 0 < v <= top and v != float("inf")


def gw_values(b: Builder, per_seed: int = 16) -> None:
    """Gateway manifests whose timeouts and caps hold odd values."""
    combos = [(f, i) for f in _FIELDS for i in range(len(_NUMBERS))]
    for field, i in sorted(b.rng.sample(combos, min(per_seed, len(combos)))):
        v = _NUMBERS[i]
        cid = f"gwask/{'.'.join(field)}={ascii(json.dumps(v))[1:-1][:14]}"
        d = b._dir(cid)
        (d / "notes_server.py").write_text(_UPSTREAM.read_text())
        doc = _gateway_doc()
        doc["upstreams"]["web"] = {"url": "http://127.0.0.1:9/mcp", "timeout_s": 2}
        node = doc
        for k in field[:-1]:
            node = node[k]
        node[field[-1]] = v
        p = d / "gw.yaml"
        p.write_text(yaml.safe_dump(doc, allow_unicode=True), encoding="utf-8")
        b.cases.append(Case(cid, "gw-values",
                            ["sh", "-c", f'exec "$ICORE_PY" -m icore mcp {p} </dev/null'],
                            inputs=[p], names=[p.name, field[-1]], timeout=120,
                            ok_codes=(0, 1, 2) if _valid(field, v) else (1, 2)))


# ------------------------------------------------------------------------- manifest-format
def _formats(doc: dict[str, Any]) -> dict[str, tuple[str, bytes, bool]]:
    """Name -> (file name, bytes, whether it is a valid manifest)."""
    j = json.dumps(doc, indent=1)
    first = next(iter(doc))
    y = yaml.safe_dump(doc, sort_keys=False)
    toml_lines = []
    for k, v in doc.items():
        if not isinstance(v, dict):
            toml_lines.append(f"{k} = {json.dumps(v)}")
    for k, v in doc.items():
        if isinstance(v, dict):
            toml_lines.append(f"[{k}]")
            toml_lines += [f"{json.dumps(kk)} = {json.dumps(vv)}" for kk, vv in v.items()
                           if not isinstance(vv, dict)]
    toml = "\n".join(toml_lines) + "\n"
    return {
        "json": ("m.json", j.encode(), True),
        "json-as-yaml": ("m.yaml", j.encode(), True),
        "yaml-as-json": ("m.json", y.encode(), True),
        "json-one-line": ("m.json", json.dumps(doc).encode(), True),
        "json-bom": ("m.json", b"\xef\xbb\xbf" + j.encode(), True),
        "json-utf16": ("m.json", j.encode("utf-16"), False),
        "json-dup-top-key": ("m.json", ("{" + json.dumps(first) + ": \"x\", " + j[1:]).encode(),
                             False),
        "json-nan": ("m.json", j.replace("{", '{"zz_nan": NaN, ', 1).encode(), False),
        "json-1e400": ("m.json", j.replace("{", '{"zz_big": 1e400, ', 1).encode(), False),
        "json-comment": ("m.json", ("// a comment\n" + j).encode(), False),
        "json-trailing-comma": ("m.json", (j[:-2] + ",\n}").encode(), True),  # YAML flow
        "json-lines": ("m.jsonl", "".join(json.dumps({k: v}) + "\n"
                                          for k, v in doc.items()).encode(), False),
        "json-array": ("m.json", json.dumps([doc]).encode(), False),
        "json-truncated": ("m.json", j[: len(j) // 2].encode(), False),
        "json-tabs": ("m.json", j.replace(" ", "\t").encode(), False),
        "toml": ("m.toml", toml.encode(), False),
        "toml-as-yaml": ("m.yaml", toml.encode(), False),
        "json-5000-digits": ("m.json", j.replace("{", '{"zz_big": ' + "9" * 5000 + ", ", 1)
                             .encode(), False),
        "json-surrogate": ("m.json", j.replace("{", '{"zz_s": "\\ud800", ', 1).encode(), False),
        "json-escaped-key": ("m.json", j.replace(json.dumps(first), '"' + "".join(
            f"\\u{ord(c):04x}" for c in first) + '"', 1).encode(), True),
    }


def manifest_format(b: Builder, per_seed: int = 12) -> None:
    """Gateway and run manifests as JSON, TOML and odd JSON: run as YAML, or refused."""
    kinds = {
        "gateway": (_gateway_doc(), lambda p, d: ["sh", "-c",
                                                  f'exec "$ICORE_PY" -m icore mcp "{p}" '
                                                  "</dev/null"]),
        "run": (seeds.RUN_MANIFEST, lambda p, d: ["ICORE", "run", "--manifest", str(p), "--out",
                                                  str(d / "o")]),
    }
    combos = [(k, f) for k in kinds for f in _formats({"x": 1})]
    for kind, fmt in sorted(b.rng.sample(combos, min(per_seed, len(combos)))):
        doc, argv = kinds[kind]
        fname, data, valid = _formats(doc)[fmt]
        cid = f"mfmt/{kind}/{fmt}"
        d = b._dir(cid)
        (d / "notes_server.py").write_text(_UPSTREAM.read_text())
        p = d / fname
        p.write_bytes(data)
        b.cases.append(Case(cid, "manifest-format", argv(p, d), inputs=[p],
                            names=[p.name, "manifest"], timeout=180,
                            ok_codes=(0, 1, 2) if valid else (1, 2)))


def all_families(b: Builder, work: Path) -> None:
    """Every family of this module."""
    elicit(b, work)
    http_upstream(b, work)
    gw_values(b)
    manifest_format(b)


__all__ = ["all_families"]
