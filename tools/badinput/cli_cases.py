"""CLI flags, manifests and Python API cases of the sweep (issue 29)."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import yaml

from . import seeds
from .cases import SECRET, Builder, Case, dumps, manifest_texts

ROOT = Path(os.environ.get("ICORE_REPO") or Path(__file__).resolve().parents[2])

NUM_BAD = ["", "-1", "nan", "1e309", "abc", "99999999999999999999", "\u00b2", "1" + "0" * 5000]
PATH_BAD = ["/proc/x/y", "/dev/full", "/proc/version", "\u00e9" * 300, "a" * 5000, "/"]


def cli_flags(b: Builder) -> None:
    """Every command and flag with empty, huge, negative, non-numeric, odd-path values."""
    d = b._dir("cli/base")
    t = b.write_doc(d, "t.jsonl", "jsonl", seeds.jsonl_rows())
    n = 0

    def add(argv: list[str], names: list[str], timeout: float = 60.0,
            ok: tuple[int, ...] = (0, 1, 2), inputs: list[Path] | None = None) -> None:
        nonlocal n
        n += 1
        # each case its own output folder: with --jobs 2, two cases writing one shared
        # folder (icore run moves a foreign one aside) made false positives
        argv = [_own_out(x, n) for x in argv]
        b.cases.append(Case(f"cli/{argv[0]}/{n}", "cli-flag", ["ICORE", *argv],
                            inputs=[t, *(inputs or [])], names=names, timeout=timeout,
                            ok_codes=ok))

    o = str(d / "o")
    shared = (o, str(b.root / "cli_run" / "o"), str(b.root / "cli_certs" / "k"))

    def _own_out(arg: str, k: int) -> str:
        for s in shared:
            if arg == s or arg.startswith(s + "/") or arg.startswith("file:" + s + "/"):
                return arg.replace(s, f"{s}{k}", 1)
        return arg

    # audit
    for flag in ("--folds", "--repeats", "--max-input-mb"):
        for v in NUM_BAD:
            add(["audit", str(t), "-o", o, "--attribution", flag, v], [flag])
    for v in ("", "bogus", "hard-flags,,", "HARD-FLAGS", "\u00e9"):
        add(["audit", str(t), "-o", o, "--fail-on", v], ["--fail-on"], ok=(0, 1, 2, 3))
    for v in ("bogus", ""):
        add(["audit", str(t), "--attribution", "--llm-base-url", "http://127.0.0.1:1/v1",
             "--llm-mode", v], ["--llm-mode"])
    for v in ("", "not a url", f"http://user:{SECRET}@127.0.0.1:1/v1", "file:///etc/passwd",
              "http://[::1", "http://127.0.0.1:99999/v1"):
        add(["audit", str(t), "--no-report", "--attribution", "--llm-base-url", v],
            ["--llm-base-url", "127.0.0.1", "url", "URL"], timeout=120)
    add(["audit", str(t), "--no-report", "--attribution", "--llm-base-url",
         "http://127.0.0.1:1/v1", "--llm-api-key", SECRET], ["127.0.0.1"], timeout=120)
    for v in ("", "file:", "file:/dev/full", "file:/proc/version", "file:/proc/x/y",
              f"http://u:{SECRET}@127.0.0.1:1/v1/traces", "ftp://x", "http://[::1",
              f"file:{d}", f"file:{o}/index.html", "file:" + "\u00e9" * 300,
              "http://127.0.0.1:99999"):
        add(["audit", str(t), "-o", o, "--otlp-endpoint", v],
            ["--otlp-endpoint", "otlp", "OTLP"], timeout=120)
    for v in [*PATH_BAD, str(t), str(d), f"{o}/index.html", f"{o}/r1.html"]:
        add(["audit", str(t), "-o", o, "--json", v], ["--json", v[:40]])
        add(["audit", str(t), "-o", v, "--prov"], ["--out", "-o", v[:40]])
    add(["audit", str(t), str(t), "--no-report"], [t.name])
    add(["audit", "--bogus", str(t)], ["--bogus"])
    # run
    m = b._dir("cli/run")
    man = m / "m.yaml"
    man.write_text(yaml.safe_dump(seeds.RUN_MANIFEST))
    ro = str(m / "o")
    for flag in ("--repeat", "--concurrency", "--llm-timeout-s", "--seeds"):
        for v in [*NUM_BAD, *(["a,b", "1,,2", "-5,3", "1" * 400] if flag == "--seeds" else [])]:
            add(["run", str(man), "--out", ro, flag, v], [flag], inputs=[man], timeout=120)
    for flag, v in (("--policy", "bogus"), ("--policy", ""), ("--family", "bogus"),
                    ("--backend", "bogus"), ("--backend", ""), ("--fail-on", "bogus"),
                    ("--llm-base-url", f"http://u:{SECRET}@127.0.0.1:1/v1"),
                    ("--otlp-endpoint", "file:/dev/full"), ("--otlp-endpoint", "file:/proc/x"),
                    ("--otlp-endpoint", f"file:{man}"), ("--otlp-endpoint", "ftp://x"),
                    ("--out", "/proc/x/y"), ("--out", "/dev/full"), ("--out", str(man)),
                    ("--out", str(m)), ("--out", "\u00e9" * 300)):
        add(["run", str(man), "--out", ro, flag, v], [flag, v[:30]], inputs=[man],
            timeout=120)
    add(["run", "--matched", "--policy", "planfence", "--out", ro], ["--policy", "--matched"])
    add(["run", "--family", "bogus", "--out", ro], ["--family", "bogus"])
    for v in ("/dev/zero", "/dev/null", "/proc/self", str(m / "nope.yaml"), str(t)):
        add(["run", v, "--out", ro], [Path(v).name], timeout=120)
    # certs
    c = b._dir("cli/certs")
    team = c / "team.yaml"
    team.write_text(yaml.safe_dump(seeds.TEAM_MANIFEST))
    for v in [*NUM_BAD, "100000000"]:
        add(["certs", "init", "--dir", str(c / "k"), "--agent", "a", "--days", v], ["--days"])
    for v in ("", "../x", "\u00e9" * 100, "a" * 300, "planner.1", "a b", "-x", "a/b", "."):
        add(["certs", "init", "--dir", str(c / "k"), "--agent", v], ["--agent", v[:20]])
    for v in ("", "\u00e9" * 100, "a" * 300, "x\ny"):
        add(["certs", "init", "--dir", str(c / "k"), "--agent", "a", "--team", v],
            ["--team", "team"])
    for v in [*PATH_BAD, str(team)]:
        add(["certs", "init", "--dir", v, "--agent", "a"], ["--dir", v[:30]], inputs=[team])
    for v in ("/dev/zero", "/proc/self", str(c / "nope.yaml"), str(t)):
        add(["certs", "init", "--manifest", v], ["--manifest", Path(v).name])
    # serve, mcp, demo
    for argv, names in (
            (["serve", str(team), "--port", "-1", "--agent", "planner"], ["--port"]),
            (["serve", str(team), "--port", "70000", "--agent", "planner"], ["--port"]),
            (["serve", str(team), "--port", "abc", "--agent", "planner"], ["--port"]),
            (["serve", str(team), "--agent", "nobody"], ["nobody"]),
            (["serve", str(team), "--agent", ""], ["--agent"]),
            (["serve", str(team), "--all", "--port", "1"], ["--port"]),
            (["serve", str(team), "--agent", "planner", "--log-level", "bogus"],
             ["--log-level", "bogus"]),
            (["serve", "/dev/zero", "--all"], ["/dev/zero"]),
            (["serve", str(c / "nope.yaml"), "--all"], ["nope.yaml"]),
            (["serve", str(c), "--all"], [c.name]),
            (["mcp", str(c / "nope.yaml")], ["nope.yaml"]),
            (["mcp", "/dev/zero"], ["/dev/zero"]),
            (["demo", "--out", "/dev/full", "--no-live"], ["--out", "/dev/full"]),
            (["demo", "--out", str(t), "--no-live"], ["--out", t.name]),
            (["demo", "--out", "/proc/x/y", "--no-live"], ["--out", "/proc"]),
            (["demo", "--out", "", "--no-live"], ["--out"]),
            (["nosuch"], ["nosuch"]), (["audit"], ["paths", "PATHS"])):
        add(argv, names, timeout=45)
    g = b._dir("cli/mcp")
    gm = g / "gw.yaml"
    gm.write_text(yaml.safe_dump(seeds.MCP_MANIFEST))  # never started: --http is refused
    for v in ("", "abc", "127.0.0.1:99999", "127.0.0.1:-1", "[::1]:x", ":", "1.2.3.4.5:80"):
        add(["mcp", str(gm), "--http", v], ["--http"], timeout=45)
    add(["mcp", str(gm), "--log-level", "bogus"], ["--log-level", "bogus"], timeout=45)
    # bench: only values that must be refused (a valid value may run for minutes)
    bench = {"core": ["--seconds"], "net": ["--n", "--seconds", "--samples"],
             "planfence": ["--jobs", "--base-delay-ms", "--scale", "--seed"],
             "state": ["--sizes", "--samples", "--trace-sizes"],
             "import": ["--otlp-mb", "--jsonl-lines", "--repeats"],
             "otel": ["--spans", "--seeds", "--families"], "icore": ["--per-mode", "--jobs"],
             "attribution": ["--folds", "--repeats"], "integrations": ["--calls", "--rounds"],
             "mcp": ["--n", "--deps"]}
    for sub, flags in bench.items():
        for flag in flags:
            # -1 is a legal --seed/--seeds (any int seeds the RNG): a timeout there is a
            # valid run, not a defect
            for v in ("nan", "abc") if flag in ("--seed", "--seeds") else ("-1", "nan", "abc"):
                add(["bench", sub, flag, v], [flag], timeout=60)
    for sub, flag in (("net", "--json"), ("state", "--json"), ("import", "--json"),
                      ("planfence", "--out"), ("attribution", "--out"), ("icore", "--out"),
                      ("import", "--workdir")):
        for v in ("/proc/x/y", "/dev/full", ""):
            add(["bench", sub, flag, v, *(["--quick"] if sub in ("net", "state") else [])],
                [flag], timeout=60)


def manifests(b: Builder, per: int) -> None:
    """Run, team and MCP manifests, damaged (``icore run``, ``certs init``, ``mcp``)."""
    gw = json.loads(json.dumps(seeds.MCP_MANIFEST))
    gw["upstreams"]["notes"]["command"] = sys.executable  # the venv's, with the mcp package
    kinds = (("run", seeds.RUN_MANIFEST, "m.yaml"), ("team", seeds.TEAM_MANIFEST, "team.yaml"),
             ("mcp", gw, "gw.yaml"))
    for kind, doc, fname in kinds:
        for i, (label, text, keys) in enumerate(manifest_texts(doc, b.rng, per)):
            cid = f"yaml/{kind}/{i}"
            d = b._dir(cid)
            p = d / fname
            if label == "binary":
                p.write_bytes(b"\xff\xfe\x00name: x\n")
            else:
                p.write_text(text, encoding="utf-8")
            if kind == "run":
                argv = ["ICORE", "run", str(p), "--out", str(d / "o")]
            elif kind == "team":
                argv = ["ICORE", "certs", "init", "--manifest", str(p)]
            else:
                shutil.copy(ROOT / "examples" / "mcp" / "notes_server.py", d)
                argv = ["ICORE", "mcp", str(p)]
            b.cases.append(Case(cid + f" {label[:60]}", "manifest", argv, inputs=[p],
                                names=[fname], fields=keys, timeout=150))


_API_HEAD = """
import sys, functools
from icore.errors import IcoreError
try:
{body}
except IcoreError as e:
    print("TYPED", type(e).__name__, e)
    sys.exit(1)
print("ACCEPTED")
"""

_WS = "    from icore.workspace import Workspace\n    ws = Workspace({'k/*': 'o'})\n" \
      "    ws.put('k/1', 1)\n"
_FENCE = ("    from icore.fence import Fence, protected, bind_action\n"
          "    from icore.memory import MemoryStore, OwnershipMap, LocalOwners\n"
          "    from icore.records import Record, derive\n"
          "    own = OwnershipMap({'k': 'o'}, {'plan/*': 'p'})\n"
          "    s = MemoryStore(own, 'o')\n"
          "    r = Record.create(key='k', owner='o', seq=1, content={})\n"
          "    s.commit(r, writer='o')\n"
          "    plan = derive(key='plan/1', owner='p', seq=1, content=bind_action('book', {}),"
          " inputs=[r]); s.install(plan)\n"
          "    @protected(depends_on={'k'})\n    def book(): return 1\n"
          "    f = Fence.for_store(s, LocalOwners({'o': s}))\n")
_LG = "    from icore.integrations.langgraph import fenced_tool\n"
_OA = "    from icore.integrations.openai_agents import fenced_function_tool as fenced_tool\n"
_AG = "    from icore.integrations.ag2 import fenced_tool\n"
_TOOL = "    def t(x: int) -> int:\n        'Add.'\n        return x\n"


def api(b: Builder) -> None:
    """The Python API with wrong types: accepting one, or a non-icore error, is a defect."""
    calls: list[tuple[str, str, list[str]]] = [
        ("ws-none", "    from icore.workspace import Workspace\n    Workspace(None)\n", ["facts"]),
        ("ws-int", "    from icore.workspace import Workspace\n    Workspace(5)\n", ["facts"]),
        ("ws-owner-int", "    from icore.workspace import Workspace\n    Workspace({'k': 5})\n",
         ["owner", "k"]),
        ("ws-key-int", "    from icore.workspace import Workspace\n    Workspace({5: 'o'})\n",
         ["key", "5"]),
        ("ws-owner-traversal", "    from icore.workspace import Workspace\n"
         "    Workspace.sqlite({'k': '../x'}, '/tmp/icore-sweep-x')\n", ["owner", "../x"]),
        ("ws-sqlite-proc", "    from icore.workspace import Workspace\n"
         "    Workspace.sqlite({'k': 'o'}, '/proc/x/y')\n", ["/proc/x/y", "directory"]),
        ("ws-sqlite-devfull", "    from icore.workspace import Workspace\n"
         "    Workspace.sqlite({'k': 'o'}, '/dev/full')\n", ["/dev/full", "directory"]),
        ("ws-sqlite-int", "    from icore.workspace import Workspace\n"
         "    Workspace.sqlite({'k': 'o'}, 5)\n", ["directory"]),
        ("put-key-int", _WS + "    ws.put(5, 1)\n", ["key"]),
        ("put-key-empty", _WS + "    ws.put('', 1)\n", ["key"]),
        ("put-object", _WS + "    ws.put('k/2', object())\n", ["value", "JSON", "content"]),
        ("put-nan", _WS + "    ws.put('k/2', float('nan'))\n",
         ["value", "NaN", "nan", "content"]),
        ("put-set", _WS + "    ws.put('k/2', {'a': {1, 2}})\n", ["value", "set"]),
        ("put-by-int", _WS + "    ws.put('k/2', 1, by=5)\n", ["by", "writer"]),
        ("put-deep", _WS + "    x = []\n    for _ in range(100000): x = [x]\n"
         "    ws.put('k/2', x)\n", ["value", "deep", "nest"]),
        ("value-none", _WS + "    ws.value(None)\n", ["key"]),
        ("head-list", _WS + "    ws.head(['k/1'])\n", ["key"]),
        ("update-none", _WS + "    ws.update('k/1', None)\n", ["fn", "function"]),
        ("update-object", _WS + "    ws.update('k/1', lambda v: object())\n",
         ["value", "JSON", "content"]),
        ("update-retries-neg", _WS + "    ws.update('k/1', lambda v: v, retries=-1)\n",
         ["retries"]),
        ("update-retries-str", _WS + "    ws.update('k/1', lambda v: v, retries='3')\n",
         ["retries"]),
        ("update-retries-nan", _WS + "    ws.update('k/1', lambda v: v, retries=float('nan'))\n",
         ["retries"]),
        ("commit-expected-int", _WS + "    ws.commit('k/1', 2, expected=5)\n", ["expected"]),
        ("put-key-surrogate", _WS.replace("Workspace(", "Workspace.sqlite(").replace(
            "'o'})", "'o'}, __import__('tempfile').mkdtemp())") + "    ws.put('k/\\ud800', 1)\n",
         ["key"]),
        ("put-key-nul", _WS + "    ws.put('k/\\x00', 1)\n", ["key"]),
        ("agent-surrogate", _WS + "    ws.agent('a\\udcff')\n", ["agent"]),
        ("ws-sqlite-nul", "    from icore.workspace import Workspace\n"
         "    Workspace.sqlite({'k': 'o'}, '/tmp/x\\x00')\n", ["store", "path"]),
        ("agent-none", _WS + "    ws.agent(None)\n", ["name", "agent"]),
        ("agent-empty", _WS + "    ws.agent('')\n", ["name", "agent"]),
        ("agent-read-int", _WS + "    ws.agent('a').read(5)\n", ["key"]),
        ("agent-exec-none", _WS + "    ws.agent('a').execute('book', None, {}, "
         "depends_on={'k/1'})\n", ["fn"]),
        ("agent-exec-args-list", _WS + _TOOL + "    ws.agent('a').execute('book', t, [1], "
         "depends_on={'k/1'})\n", ["args"]),
        # the tool's own argument given, so only the damaged one is wrong
        ("agent-exec-action-int", _WS + _TOOL + "    ws.agent('a').execute(5, t, {'x': 1}, "
         "depends_on={'k/1'})\n", ["action"]),
        ("agent-exec-deps-int", _WS + _TOOL + "    ws.agent('a').execute('book', t, {'x': 1}, "
         "depends_on=5)\n", ["depends_on"]),
        ("fence-plain-fn", _FENCE + "    f.execute(lambda: 1, roots=[plan.id], args={})\n",
         ["tool"]),
        ("fence-none-tool", _FENCE + "    f.execute(None, roots=[plan.id], args={})\n", ["tool"]),
        ("fence-roots-none", _FENCE + "    f.execute(book, roots=None, args={})\n", ["roots"]),
        ("fence-roots-dict", _FENCE + "    f.execute(book, roots=[{}], args={})\n", ["roots"]),
        ("fence-roots-str", _FENCE + "    f.execute(book, roots=plan.id, args={})\n", ["roots"]),
        ("fence-roots-gen", _FENCE + "    f.execute(book, roots=iter([5]), args={})\n",
         ["roots"]),
        ("fence-args-list", _FENCE + "    f.execute(book, roots=[plan.id], args=[1])\n",
         ["args"]),
        ("fence-args-none", _FENCE + "    f.execute(book, roots=[plan.id], args=None)\n",
         ["args"]),
        ("fence-args-keyint", _FENCE + "    f.execute(book, roots=[plan.id], args={1: 2})\n",
         ["args"]),
        ("fence-replan-int", _FENCE + "    f.execute(book, roots=[plan.id], args={}, replan=5)\n",
         ["replan"]),
        ("fence-raise-str", _FENCE + "    f.execute(book, roots=[plan.id], args={}, "
         "raise_on_block='no')\n", ["raise_on_block"]),
        ("protected-deps-str", "    from icore.fence import protected\n"
         "    protected(depends_on='k')(lambda: 1)\n", ["depends_on"]),
        ("protected-deps-int", "    from icore.fence import protected\n"
         "    protected(depends_on={5})(lambda: 1)\n", ["depends_on"]),
    ]
    for name, head in (("lg", _LG), ("oa", _OA), ("ag2", _AG)):
        calls += [
            (f"{name}-fence-none", head + _TOOL + "    fenced_tool(t, depends_on={'k'}, "
             "fence=None)\n", ["fence", "agent"]),
            (f"{name}-tool-int", head + "    fenced_tool(5, depends_on={'k'}, agent='a')\n",
             ["tool"]),
            (f"{name}-tool-class", head + "    class C:\n        'Doc.'\n"
             "    fenced_tool(C, depends_on={'k'}, agent='a')\n", ["tool", "class"]),
            (f"{name}-tool-partial", head + _TOOL + "    fenced_tool(functools.partial(t, 1), "
             "depends_on={'k'}, agent='a')\n", ["tool", "partial"]),
            (f"{name}-tool-kwlambda", head + "    fenced_tool(lambda **kw: 1, depends_on={'k'},"
             " agent='a')\n", ["tool", "lambda", "kw"]),
            (f"{name}-deps-int", head + _TOOL + _WS + "    fenced_tool(t, depends_on=5, "
             "agent=ws.agent('a'))\n", ["depends_on"]),
            (f"{name}-deps-none", head + _TOOL + _WS + "    fenced_tool(t, depends_on=None, "
             "agent=ws.agent('a'))\n", ["depends_on"]),
            (f"{name}-agent-int", head + _TOOL + "    fenced_tool(t, depends_on={'k'}, "
             "agent=5)\n", ["agent"]),
            (f"{name}-recorder-str", head + _TOOL + _WS + "    fenced_tool(t, depends_on={'k/1'}"
             ", agent=ws.agent('a'), recorder='x')\n", ["recorder"]),
        ]
    for name, head in (("lg", _LG), ("oa", _OA)):
        calls += [(f"{name}-onblock", head + _TOOL + _WS + "    fenced_tool(t, depends_on="
                   "{'k/1'}, agent=ws.agent('a'), on_block='bogus')\n", ["on_block"])]
    ad = "    from icore.adapters import audit_file, audit_path, audit_trace, parse_otlp, " \
         "parse_jsonl, parse_who_and_when_data, load_trace\n"
    calls += [
        ("audit-file-none", ad + "    audit_file(None)\n", ["path"]),
        ("audit-file-int", ad + "    audit_file(5)\n", ["path"]),
        ("audit-file-bytes", ad + "    audit_file(b'x.jsonl')\n", ["path"]),
        ("audit-file-devzero", ad + "    audit_file('/dev/zero')\n", ["/dev/zero"]),
        ("audit-file-proc", ad + "    audit_file('/proc/self/status')\n", ["status"]),
        ("audit-file-dir", ad + "    audit_file('/tmp')\n", ["/tmp"]),
        ("audit-path-missing", ad + "    audit_path('/nonexistent/x.jsonl')\n", ["x.jsonl"]),
        ("load-trace-list", ad + "    load_trace(['a'])\n", ["path"]),
        ("parse-otlp-none", ad + "    parse_otlp(None, file='f')\n", ["f"]),
        ("parse-otlp-bytes", ad + "    parse_otlp(b'\\xff\\xfe', file='f')\n", ["f"]),
        ("parse-otlp-dict", ad + f"    parse_otlp({dumps(seeds.otlp_doc())!r}[:-3], file='f')\n",
         ["f"]),
        ("parse-jsonl-int", ad + "    parse_jsonl(5, file='f')\n", ["f"]),
        ("parse-jsonl-list", ad + "    parse_jsonl([1, 2], file='f')\n", ["f"]),
        ("parse-ww-none", ad + "    parse_who_and_when_data(None, file='f')\n", ["f"]),
        ("parse-ww-list", ad + "    parse_who_and_when_data([1], file='f')\n", ["f"]),
        ("audit-trace-none", ad + "    audit_trace(None)\n", ["trace"]),
        ("audit-trace-str", ad + "    audit_trace('x')\n", ["trace"]),
    ]
    for name, body, names in calls:
        b._dir(f"api/{name}")
        b.cases.append(Case(f"api/{name}", "python-api",
                            ["PY", _API_HEAD.format(body=body)], names=names, refusal=True,
                            timeout=60))
