"""Bad inputs of round 29's newer surfaces (issue 29, second sweep round).

Families: the MCP gateway manifest's files and scalars (``gateway``), the HTTP gateway
fed bodies that are no single JSON-RPC message (``http-body``), the Workspace API and
``fenced_tool`` on odd callables (``workspace-api``), hand-edited run recordings
(``recording``), two audits into one ``--out`` at once (``concurrent-out``) and Ctrl-C
during an audit exporting spans to a file (``sigint-otlp``). Each is generated from the
sweep's seed; none is tuned to a fix.
"""

from __future__ import annotations

import copy
import json
import shutil
import sys
from typing import Any

import yaml

from . import seeds
from .cases import Builder, Case, dumps
from .cli_cases import _API_HEAD, ROOT

_UPSTREAM = ROOT / "examples" / "mcp" / "notes_server.py"


def _gateway_doc() -> dict[str, Any]:
    doc = copy.deepcopy(seeds.MCP_MANIFEST)
    doc["upstreams"]["notes"]["command"] = sys.executable
    return doc


def gateway(b: Builder) -> None:
    """Gateway manifests whose files collide or whose scalars are of the wrong type."""
    numbers = [True, False, "3", "1e400", "nan", [1], {"a": 1}, None]
    bools = ["yes", "no", "true", 1, 0, "", [True], None]
    scalars = [(("upstreams", "notes", "timeout_s"), numbers), (("gate_timeout_s",), numbers),
               (("upstreams", "notes", "trust_updates"), bools), (("facts", "tools"), bools)]
    files = {
        "store-is-file": ("store", "path", "FILE:facts.db"),
        "store-is-manifest": ("store", "path", "gw.yaml"),
        "otel-is-manifest": ("otel", None, "file:gw.yaml"),
        "otel-is-upstream": ("otel", None, "file:notes_server.py"),
        "otel-is-trace": ("otel", None, "file:.icore-mcp/trace.jsonl"),
        "otel-in-store": ("otel", None, "file:.icore-mcp/facts/x.db"),
        "otel-empty": ("otel", None, "file:"),
        "otel-dir": ("otel", None, "file:."),
        "trace-is-upstream": ("trace", None, "notes_server.py"),
        "trace-is-manifest": ("trace", None, "gw.yaml"),
        "cwd-is-file": ("upstreams", "notes", "CWD:notes_server.py"),
    }
    cases: list[tuple[str, dict[str, Any], list[str]]] = []
    for name, (top, sub, value) in files.items():
        doc = _gateway_doc()
        if value.startswith("CWD:"):
            doc["upstreams"]["notes"]["cwd"] = value[4:]
        elif sub is None:
            doc[top] = value
        else:
            doc[top][sub] = value.removeprefix("FILE:")
        cases.append((name, doc, [top]))
    for path, wrong in scalars:
        for v in b.rng.sample(wrong, 3):
            doc = _gateway_doc()
            node = doc
            for k in path[:-1]:
                node = node.setdefault(k, {})
            node[path[-1]] = v
            cases.append((f"{'.'.join(path)}={json.dumps(v)[:12]}", doc, [path[-1]]))
    for name, doc, names in cases:
        cid = f"gateway/{name}"
        d = b._dir(cid)
        shutil.copy(_UPSTREAM, d)
        (d / "facts.db").write_text("the user's own file\n")
        (d / ".icore-mcp").mkdir()  # the trace is left to the gateway (a file there
        # that no gateway wrote is refused, which would hide the case's own defect)
        p = d / "gw.yaml"
        p.write_text(yaml.safe_dump(doc))
        b.cases.append(Case(cid, "gateway", ["ICORE", "mcp", str(p)],
                            inputs=[p, d / "notes_server.py", d / "facts.db"],
                            names=["gw.yaml", *names], timeout=60, ok_codes=(1, 2)))


_HTTP = '''
import json, os, re, subprocess, sys, urllib.request, urllib.error
p = subprocess.Popen([sys.executable, "-m", "icore", "mcp", {man!r}, "--http",
                      "127.0.0.1:0"], stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                     text=True)
try:
    port = None
    for line in p.stderr:
        m = re.search(r"serving http://127.0.0.1:(\\d+)/mcp", line)
        if m:
            port = int(m.group(1))
            break
    if port is None:
        print("TYPED gateway did not start"); sys.exit(1)
    req = urllib.request.Request(f"http://127.0.0.1:{{port}}/mcp", data={body},
        headers={{"Content-Type": {ctype!r},
                 "Accept": "application/json, text/event-stream"}}, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=20) as r:
            status, text = r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        status, text = e.code, e.read().decode()
    try:
        msg = json.loads(text)
    except ValueError:
        print("ACCEPTED not a JSON-RPC answer:", status, text[:200]); sys.exit(0)
    err = msg.get("error") if isinstance(msg, dict) else None
    if not isinstance(err, dict) or msg.get("jsonrpc") != "2.0":
        print("ACCEPTED no JSON-RPC error:", status, text[:200]); sys.exit(0)
    if len(err.get("message", "")) > 400 or "pydantic" in text:
        print("ACCEPTED a validation dump:", text[:200]); sys.exit(0)
    print("TYPED", status, err.get("code"), err.get("message")); sys.exit(1)
finally:
    p.terminate()
    p.wait(10)
'''


def http_body(b: Builder) -> None:
    """POST bodies that are no single JSON-RPC message, to a real gateway on port 0."""
    ok = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    bodies = {
        "batch": json.dumps([ok]), "batch-empty": "[]", "number": "5", "string": '"x"',
        "null": "null", "bool": "true", "truncated": '{"jsonrpc": "2.0"',
        "id-object": json.dumps({**ok, "id": {"a": 1}}),
        "id-float": json.dumps({**ok, "id": 1.5}), "id-bool": json.dumps({**ok, "id": True}),
        "version": json.dumps({**ok, "jsonrpc": "1.0"}),
        "method-int": json.dumps({**ok, "method": 5}),
        "params-list": json.dumps({**ok, "params": [1, 2]}),
        "no-method": json.dumps({"jsonrpc": "2.0", "id": 1}),
        "deep": "EXPR:b'[' * 100_000 + b']' * 100_000",
        "huge": "EXPR:json.dumps({'jsonrpc': '2.0', 'id': 1, 'method': 'ping', "
                "'params': {'x': 'a' * (6 << 20)}}).encode()",
        "invalid-utf8": '{"jsonrpc": "2.0", "id": 1, "method": "\xff\xfe"}',
    }
    picked = b.rng.sample(sorted(bodies), min(len(bodies), 12))
    d0 = b._dir("http/base")
    shutil.copy(_UPSTREAM, d0)
    doc = _gateway_doc()
    doc.pop("store")
    doc.pop("trace")
    man = d0 / "gw.yaml"
    man.write_text(yaml.safe_dump(doc))
    cases = [(k, bodies[k], "application/json") for k in picked]
    cases += [("ctype-text", json.dumps(ok), "text/plain"), ("ctype-form", json.dumps(ok),
              "application/x-www-form-urlencoded"), ("ctype-empty", json.dumps(ok), "")]
    for name, body, ctype in cases:
        raw = body.encode("latin-1") if name == "invalid-utf8" else body.encode()
        expr = body[5:] if body.startswith("EXPR:") else repr(raw)  # argv stays short
        code = _HTTP.format(man=str(man), body=expr, ctype=ctype)
        b.cases.append(Case(f"http/{name}", "http-body", ["PY", code], inputs=[man],
                            names=["TYPED"], refusal=True, timeout=90))


_WS = ("    from icore.workspace import Workspace\n    ws = Workspace({'k/*': 'o'})\n"
       "    ws.put('k/1', 1)\n")
_LG = "    from icore.integrations.langgraph import fenced_tool\n"


def workspace_api(b: Builder) -> None:
    """Ownership maps, keys and values of the Workspace API; fenced_tool on odd callables."""
    refused: list[tuple[str, str, list[str]]] = [
        ("own-empty-key", "    from icore.workspace import Workspace\n"
         "    Workspace({'': 'o'})\n", ["key", "''"]),
        ("own-empty-owner", "    from icore.workspace import Workspace\n"
         "    Workspace({'k': ''})\n", ["owner"]),
        ("own-owner-none", "    from icore.workspace import Workspace\n"
         "    Workspace({'k': None})\n", ["owner"]),
        ("own-list", "    from icore.workspace import Workspace\n"
         "    Workspace([('k', 'o')])\n", ["facts", "mapping", "dict"]),
        ("own-key-bytes", "    from icore.workspace import Workspace\n"
         "    Workspace({b'k': 'o'})\n", ["key"]),
        ("own-key-nul", "    from icore.workspace import Workspace\n"
         "    Workspace({'k\\x00': 'o'})\n", ["key"]),
        *[(f"ws-{n}", "    from icore.workspace import Workspace\n"
           f"    Workspace({{'k': 'o'}}, {arg})\n", [arg.split("=")[0]])
          for n, arg in (("timeout-neg", "timeout_s=-1"), ("timeout-nan", "timeout_s=float('nan')"),
                         ("timeout-true", "timeout_s=True"), ("timeout-str", "timeout_s='3'"),
                         ("stores-int", "stores={'o': 5}"), ("stores-list", "stores=[1]"),
                         ("remote-str", "remote='x'"), ("closing-int", "closing=5"))],
        ("put-bytes", _WS + "    ws.put('k/2', b'x')\n", ["value", "JSON", "bytes"]),
        ("put-decimal", _WS + "    import decimal\n    ws.put('k/2', decimal.Decimal(1))\n",
         ["value", "JSON", "Decimal"]),
        ("put-intkeys", _WS + "    ws.put('k/2', {1: 2})\n", ["value", "JSON", "key"]),
        ("put-tuplekeys", _WS + "    ws.put('k/2', {(1, 2): 3})\n", ["value", "JSON", "key"]),
        ("put-inf", _WS + "    ws.put('k/2', [float('inf')])\n",
         ["value", "inf", "JSON", "finite", "content"]),
        ("put-cycle", _WS + "    x = []\n    x.append(x)\n    ws.put('k/2', x)\n",
         ["value", "JSON", "circular", "deep", "nest"]),
        ("put-unowned", _WS + "    ws.put('zz/1', 1)\n", ["zz/1", "owner", "key"]),
        ("lg-builtin", _LG + _WS + "    fenced_tool(len, depends_on={'k/1'}, "
         "agent=ws.agent('a'))\n", ["tool", "len", "builtin"]),
        ("lg-asyncgen", _LG + _WS + "    async def g(x: int):\n        'Gen.'\n"
         "        yield x\n    fenced_tool(g, depends_on={'k/1'}, agent=ws.agent('a'))\n",
         ["tool", "generator"]),
        ("lg-gen", _LG + _WS + "    def g(x: int):\n        'Gen.'\n"
         "        yield x\n    fenced_tool(g, depends_on={'k/1'}, agent=ws.agent('a'))\n",
         ["tool", "generator"]),
        ("lg-deps-unowned", _LG + _WS + "    def t(x: int) -> int:\n        'Add.'\n"
         "        return x\n    fenced_tool(t, depends_on={'zz/1'}, agent=ws.agent('a'))\n",
         ["zz/1", "depends_on", "owner"]),
        ("rec-pause-str", "    from icore.integrations import RunRecorder\n"
         "    RunRecorder().add('a', 'thought', 'x', pause='no')\n", ["pause"]),
        ("rec-replan-int", "    from icore.integrations import RunRecorder\n"
         "    RunRecorder().add('a', 'plan', 'x', replan=1)\n", ["replan"]),
        ("rec-terminates-str", "    from icore.integrations import RunRecorder\n"
         "    RunRecorder().add('a', 'output', 'x', terminates='yes')\n", ["terminates"]),
    ]
    for name, body, names in refused:
        b._dir(f"ws/{name}")
        b.cases.append(Case(f"ws/{name}", "workspace-api",
                            ["PY", _API_HEAD.format(body=body)], names=names, refusal=True,
                            timeout=60))


def recording(b: Builder) -> None:
    """Hand-edited JSONL recordings: markers as strings or numbers, moved or doubled."""
    rows = seeds.jsonl_rows()
    marks = [("pause", "thought"), ("replan", "plan"), ("terminates", "output")]
    values: list[Any] = ["yes", "no", "true", "false", 1, 0, "", "maybe", [True], {"v": 1}]
    for field, kind in marks:
        for v in b.rng.sample(values, 4):
            doc = [*copy.deepcopy(rows[:2]), {"agent": "a", "kind": kind, "content": "x",
                                              field: v}, *copy.deepcopy(rows[2:])]
            for i, r in enumerate(doc[1:], start=0):
                if isinstance(r, dict) and "step" in r:
                    r["step"] = i
            cid = f"rec/{field}={json.dumps(v)[:10]}"
            d = b._dir(cid)
            p = b.write_doc(d, "run.jsonl", "jsonl", doc)
            b.audit_case(cid, "recording", p, [field])
            b.cases[-1].ok_codes = (1,)  # a marker that is no JSON boolean is refused


def concurrency(b: Builder) -> None:
    """Two audits into one --out at once; Ctrl-C during an audit exporting to a file."""
    good = seeds.jsonl_rows()
    d = b._dir("conc/out")
    for side in ("a", "b"):
        (d / side).mkdir()
        for i in range(30):
            (d / side / f"t{i}.jsonl").write_text(
                "\n".join(dumps(x) for x in good).replace('"r1"', f'"{side}{i}"') + "\n")
    inputs = [d / "a" / "t0.jsonl", d / "b" / "t0.jsonl"]
    script = (f'"$ICORE_PY" -m icore audit {d}/a -o {d}/o & A=$!; '
              f'"$ICORE_PY" -m icore audit {d}/b -o {d}/o; B=$?; wait $A; A=$?; '
              f'"$ICORE_PY" -m icore audit {d}/a -o {d}/o >/dev/null || exit 3; '
              f'grep -q a0.html {d}/o/index.html || exit 4; exit $((A > B ? A : B))')
    b.cases.append(Case("conc/two-audits-one-out", "concurrent-out", ["sh", "-c", script],
                        inputs=inputs, timeout=240))
    for k, delay in enumerate(sorted(b.rng.sample([0.3, 0.6, 0.9, 1.2, 1.5, 2.0, 2.5], 3))):
        e = b._dir(f"conc/sigint{k}")
        (e / "runs").mkdir()
        for i in range(200):
            (e / "runs" / f"t{i:03d}.jsonl").write_text(
                "\n".join(dumps(x) for x in good).replace('"r1"', f'"r{i}"') + "\n")
        spans = e / "spans.otlp.jsonl"
        script = (f'"$ICORE_PY" -m icore audit {e}/runs --no-report --otlp-endpoint '
                  f'file:{spans} & P=$!; sleep {delay}; kill -INT $P; wait $P; '
                  f'[ -s {spans} ] || exit 0; '
                  f'"$ICORE_PY" -m icore audit {spans} --no-report || exit 3')
        b.cases.append(Case(f"conc/sigint{k}-{delay}s", "sigint-otlp", ["sh", "-c", script],
                            inputs=[e / "runs" / "t000.jsonl"], timeout=240,
                            ok_codes=(0, 1, 2, 130)))


def all_families(b: Builder) -> None:
    """Every family of this module."""
    gateway(b)
    http_body(b)
    workspace_api(b)
    recording(b)
    concurrency(b)


__all__ = ["all_families"]
