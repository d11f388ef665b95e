"""Bad inputs of the high-level seams the first four rounds did not reach (issue 29, round 5).

Families, each generated from the sweep's seed (sampled where the product is large):

- ``wrap-odd``: the framework wrappers (LangGraph ``fenced_tool``, the Agents SDK's
  ``fenced_function_tool``, AG2's ``fenced_tool``) handed odd callables (generators,
  bound and class methods, callable objects, pydantic models, ``*args``/``**kw``-only and
  positional-only functions, unresolvable annotations, odd names), odd ``depends_on``
  and ``approve``/``replan`` hooks, then called through the framework's own dispatch with
  odd arguments (NaN, 10^400, lone surrogates, 1 MB strings, deep nesting, extra keys).
  Wrapping may refuse with a typed error; a call may answer with an error message; any
  other exception is a defect.
- ``gw-upstream``: a real gateway (``python -m icore mcp``) over stdio, driven by a client,
  in front of :mod:`fake_upstream` misbehaving at one request (garbage, bytes that are no
  UTF-8, wrong ids, a 40 MB answer, a deep nesting, ``NaN``, an exit, a hang, odd
  ``tools/list`` schemas). The gateway must answer every request with JSON-RPC (an error
  is fine) within its timeout, write nothing else on stdout, exit when stdin closes, and
  its trace must audit.
- ``gw-flags``: ``icore mcp`` flags (``--http``, ``--log-level``) with bad values, and trace
  paths that are links to the gateway's own inputs, under a file, in a read-only folder.
- ``rec-edit``: recordings written by ``RunRecorder.write`` and by the gateway, then
  edited as a user might (truncated, concatenated, lines duplicated or swapped, CRLF, a
  BOM, NUL bytes, deep nesting, U+2028, a 20 MB line, a field given a wrong type) and
  audited.
- ``rec-values``: ``RunRecorder`` given values a trace line cannot hold as they are
  (NaN, bytes, objects whose ``repr`` raises, 5000-deep lists, ints past the 4300-digit
  limit, cycles, lone surrogates) at each argument, then written and audited.
- ``out-paths``: every command that writes (``audit -o/--json/--otlp-endpoint``, ``run
  --out``, ``demo --out``, ``certs init --dir``, ``bench import --json/--workdir``,
  ``RunRecorder.write``) pointed at its own input (directly, through a link, a hard link,
  a ``..`` detour), at a folder holding the user's files, a link to one, a file where a
  folder goes: what the user had must be byte-identical and still there afterwards.
"""

from __future__ import annotations

import copy
import json
import os
import random
import shutil
import sys
from pathlib import Path
from typing import Any

import yaml

from . import seeds
from .cases import BAD, Builder, Case, dumps
from .surfaces import _UPSTREAM, _gateway_doc

_FAKE = Path(__file__).resolve().with_name("fake_upstream.py")

# ------------------------------------------------------------------------- wrap-odd
_TOOLS: dict[str, str] = {
    "plain": "def T(city: str, n: int = 1) -> str:\n    'Book.'\n    return f'{city} {n}'\n",
    "generator": "def T(city: str):\n    'Gen.'\n    yield city\n",
    "async-gen": "async def T(city: str):\n    'Gen.'\n    yield city\n",
    "bound-method": "class K:\n    def go(self, city: str) -> str:\n        'Book.'\n"
                    "        return city\nT = K().go\n",
    "unbound-method": "class K:\n    def go(self, city: str) -> str:\n        'Book.'\n"
                      "        return city\nT = K.go\n",
    "classmethod": "class K:\n    @classmethod\n    def go(cls, city: str) -> str:\n"
                   "        'Book.'\n        return city\nT = K.go\n",
    "staticmethod-obj": "def _f(city: str) -> str:\n    'Book.'\n    return city\n"
                        "T = staticmethod(_f)\n",
    "callable-obj": "class K:\n    'Book.'\n    def __call__(self, city: str) -> str:\n"
                    "        return city\nT = K()\n",
    "pydantic-model": "from pydantic import BaseModel, field_validator\n"
                      "class T(BaseModel):\n    'Book.'\n    city: str\n"
                      "    @field_validator('city')\n    @classmethod\n"
                      "    def v(cls, x):\n        raise ValueError('no')\n",
    "pydantic-arg": "from pydantic import BaseModel, field_validator\n"
                    "class P(BaseModel):\n    city: str\n    @field_validator('city')\n"
                    "    @classmethod\n    def v(cls, x):\n        if x != 'Porto':\n"
                    "            raise ValueError('only Porto')\n        return x\n"
                    "def T(p: P) -> str:\n    'Book.'\n    return p.city\n",
    "star-args": "def T(*args):\n    'Book.'\n    return str(args)\n",
    "star-args-kw": "def T(city: str, *args, **kw):\n    'Book.'\n    return city\n",
    "kw-only": "def T(*, city: str) -> str:\n    'Book.'\n    return city\n",
    "pos-only": "def T(city: str, /) -> str:\n    'Book.'\n    return city\n",
    "no-annotations": "def T(city):\n    return city\n",
    "forward-ref": "def T(city: 'Nowhere') -> str:\n    'Book.'\n    return city\n",
    "bytes-arg": "def T(city: bytes) -> str:\n    'Book.'\n    return str(city)\n",
    "lock-arg": "import threading\ndef T(city: threading.Lock) -> str:\n    'Book.'\n"
                "    return str(city)\n",
    "return-ref": "def T(city: str) -> 'Nowhere':\n    'Book.'\n    return city\n",
    "recursive-model": "from pydantic import BaseModel\nclass N(BaseModel):\n"
                       "    next: 'N | None' = None\ndef T(city: str, n: N | None = None) -> str:"
                       "\n    'Book.'\n    return city\n",
    "bad-syntax-ref": "def T(city: 'int +') -> str:\n    'Book.'\n    return str(city)\n",
    "complex-arg": "def T(city: complex) -> str:\n    'Book.'\n    return str(city)\n",
    "default-object": "def T(city: str = object()) -> str:\n    'Book.'\n    return str(city)\n",
    "unicode-name": "def T(city: str) -> str:\n    'Book.'\n    return city\n"
                    "T.__name__ = T.__qualname__ = 'r\u00e9server \u2603'\n",
    "empty-name": "def T(city: str) -> str:\n    'Book.'\n    return city\n"
                  "T.__name__ = T.__qualname__ = ''\n",
    "long-name": "def T(city: str) -> str:\n    'Book.'\n    return city\n"
                 "T.__name__ = T.__qualname__ = 'b' * 5000\n",
    "builtin-method": "T = 'abc'.replace\n",
    "lambda": "T = lambda city: city\n",
    "wraps": "import functools\ndef _f(city: str) -> str:\n    'Book.'\n    return city\n"
             "@functools.wraps(_f)\ndef T(*a, **k):\n    return _f(*a, **k)\n",
    "returns-object": "def T(city: str) -> str:\n    'Book.'\n    return object()\n",
    "returns-nan": "def T(city: str) -> float:\n    'Book.'\n    return float('nan')\n",
    "returns-bytes": "def T(city: str) -> bytes:\n    'Book.'\n    return b'\\xff\\xfe'\n",
    "returns-huge": "def T(city: str) -> str:\n    'Book.'\n    return 'x' * (8 << 20)\n",
}

_ARGS: dict[str, str] = {
    "good": "{'city': 'Porto'}", "nan": "{'city': float('nan')}",
    "inf-n": "{'city': 'Porto', 'n': float('inf')}", "huge-int": "{'city': 10**400}",
    "surrogate": "{'city': 'P\\ud800'}", "mb-string": "{'city': 'x' * (1 << 20)}",
    "deep": "{'city': DEEP}", "extra": "{'city': 'Porto', 'zz': 1, '': 2}",
    "empty": "{}", "none-val": "{'city': None}", "nul": "{'city': 'a\\x00b'}",
    "key-unicode": "{'c\u00eft\u00ff': 'x', 'city': 'Porto'}", "list-val": "{'city': ['a']}",
}

_DEPS: dict[str, str] = {
    "set": "{'k/1'}",
    "fn-missing-arg": "(lambda a: {f\"k/{a['nope']}\"})",
    "fn-returns-none": "(lambda a: None)",
    "fn-returns-ints": "(lambda a: [1, 2])",
    "fn-raises": "(lambda a: 1 / 0)",
    "fn-unowned": "(lambda a: {'zz/' + str(a.get('city'))})",
    "fn-unicode": "(lambda a: {'k/' + str(a.get('city'))})",
    "fn-returns-str": "(lambda a: 'k/1')",
}

_HEAD = """
import sys, asyncio, json, math
sys.setrecursionlimit(10_000)
DEEP = []
for _ in range(900):
    DEEP = [DEEP]
from icore.errors import IcoreError
from icore.workspace import Workspace
ws = Workspace({'k/*': 'o'}); ws.put('k/1', 1)
ag = ws.agent('a')
"""

_WRAP = """try:
    W = {fn}(T, depends_on=DEPS, agent=ag)
except IcoreError as e:
    print('TYPED', type(e).__name__, e); sys.exit(1)
with ag.scope('c1'):
    ag.read('k/1')
"""

_CALL = {
    "lg": """
from icore.integrations.langgraph import fenced_tool
from typing import Annotated, TypedDict
from langgraph.graph import StateGraph, START, END
from langgraph.graph.message import add_messages
from langgraph.prebuilt import ToolNode
from langchain_core.messages import AIMessage
class S(TypedDict, total=False):
    messages: Annotated[list, add_messages]
""" + _WRAP.format(fn="fenced_tool") + """g = StateGraph(S); g.add_node('tools', ToolNode([W]))
g.add_edge(START, 'tools'); g.add_edge('tools', END); app = g.compile()
try:
  with ag.scope('c1'):
    out = app.invoke({'messages': [AIMessage('', tool_calls=[{'name': W.name, 'args': ARGS,
                                                              'id': 'c1'}])]},
                     {'configurable': {'thread_id': 'c1'}})
    print('ANSWER', ascii(str(out['messages'][-1].content)[:300]))
except IcoreError as e:
    print('TYPED', type(e).__name__, e); sys.exit(1)
""",
    "oa": """
from icore.integrations.openai_agents import fenced_function_tool
from agents.tool_context import ToolContext
""" + _WRAP.format(fn="fenced_function_tool") + """try:
    text = json.dumps(ARGS)
except (ValueError, RecursionError):
    text = '{"city": NaN, ' + '"d": ' + '[' * 5000 + ']' * 5000 + '}'
async def go():
    with ag.scope('c1'):
        ctx = ToolContext(context=None, tool_name=W.name, tool_call_id='c1',
                          tool_arguments=text)
        return await W.on_invoke_tool(ctx, text)
try:
    print('ANSWER', ascii(str(asyncio.run(go()))[:300]))
except IcoreError as e:
    print('TYPED', type(e).__name__, e); sys.exit(1)
""",
    "ag2": """
from icore.integrations.ag2 import fenced_tool
""" + _WRAP.format(fn="fenced_tool") + """print('WRAPPED', type(W).__name__)
""",
}


def wrap_odd(b: Builder, per_seed: int = 70) -> None:
    """Odd tools x arguments x ``depends_on`` per framework, sampled with the seed."""
    combos = [(fw, t, a, d) for fw in _CALL for t in _TOOLS for a in _ARGS for d in _DEPS
              if fw != "ag2" or a == "good"]
    for fw, t, a, d in sorted(b.rng.sample(combos, min(per_seed, len(combos)))):
        cid = f"wrap/{fw}/{t}/{a}/{d}"
        b._dir(cid)
        code = (_HEAD + _TOOLS[t] + f"ARGS = {_ARGS[a]}\nDEPS = {_DEPS[d]}\n" + _CALL[fw])
        b.cases.append(Case(cid, "wrap-odd", ["PY", code],
                            names=["tool", "depends_on", "T", "city", "name", "argument"],
                            timeout=90, ok_codes=(0, 1)))


# ------------------------------------------------------------------------- gw-upstream
_DRIVER = r'''
import json, os, select, subprocess, sys, time
man, trace = sys.argv[1], sys.argv[2]
p = subprocess.Popen([sys.executable, "-m", "icore", "mcp", man], stdin=subprocess.PIPE,
                     stdout=subprocess.PIPE, stderr=open(man + ".err", "wb"))
buf = b""
ON_REQUEST = None  # a request from the gateway (elicitation): handled, not an answer
def send(msg):
    try:
        p.stdin.write(json.dumps(msg).encode() + b"\n"); p.stdin.flush()
    except (BrokenPipeError, OSError):
        pass
def answer(rid, limit):
    global buf
    end = time.monotonic() + limit
    while True:
        while b"\n" in buf:
            line, buf = buf.split(b"\n", 1)
            try:
                msg = json.loads(line)
            except ValueError:
                print("LEAK a line on the gateway's stdout is no JSON:", line[:120]); fin(4)
            if not isinstance(msg, dict) or msg.get("jsonrpc") != "2.0":
                print("LEAK not JSON-RPC 2.0:", line[:120]); fin(4)
            if ON_REQUEST is not None and "method" in msg and "id" in msg:
                ON_REQUEST(msg)
                continue
            if msg.get("id") == rid:
                if "error" not in msg and "result" not in msg:
                    print("LEAK an answer with neither result nor error"); fin(4)
                return msg
        left = end - time.monotonic()
        if left <= 0:
            print(f"HANG no answer to request {rid} in {limit} s"); fin(5)
        r, _, _ = select.select([p.stdout], [], [], left)
        if r:
            chunk = os.read(p.stdout.fileno(), 1 << 20)
            if not chunk:
                return None
            buf += chunk
def fin(code):
    try:
        p.stdin.close()
    except OSError:
        pass
    try:
        rc = p.wait(30)
    except subprocess.TimeoutExpired:
        p.kill(); rc = p.wait()
        print("NOEXIT the gateway did not exit 30 s after stdin closed"); code = code or 6
    err = open(man + ".err", "rb").read().decode("utf-8", "replace")
    print(err[-3000:])
    if rc not in (0, 1, 2, -9):
        print(f"EXIT gateway exit code {rc}"); code = code or 7
    if code == 0 and os.path.isfile(trace):
        a = subprocess.run([sys.executable, "-m", "icore", "audit", trace, "--no-report"],
                           capture_output=True, text=True, timeout=120, errors="replace")
        print("AUDIT", a.returncode, a.stdout[-800:], a.stderr[-2000:])
        if a.returncode not in (0, 1):
            code = 8
    sys.exit(code)
reqs = [("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                        "clientInfo": {"name": "sweep", "version": "1"}}),
        ("tools/list", {}), ("resources/read", {"uri": "memo://price"}),
        ("tools/call", {"name": "set_price", "arguments": {"value": "120"}}),
        ("tools/call", {"name": "weather", "arguments": {"city": "Porto"}}),
        ("resources/read", {"uri": "memo://price"}),
        ("tools/call", {"name": "book", "arguments": {"city": "Porto", "price": 120}}),
        ("ping", {})]
for i, (m, params) in enumerate(reqs, start=1):
    send({"jsonrpc": "2.0", "id": i, "method": m, "params": params})
    msg = answer(i, 90 if i == 1 else 40)  # the gateway itself waits 30 s at start
    if msg is None:
        print(f"CLOSED the gateway closed stdout at request {i} ({m})")
        fin(0 if i == 1 else 9)
    if i == 1:
        send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        if "error" in msg:
            fin(0)
fin(0)
'''

_MISBEHAVE = ["garbage", "nonutf8", "wrong-id", "no-jsonrpc", "result-list", "error-string",
              "error-odd", "huge", "deep", "nan", "twice", "exit", "hang", "null-id",
              "stdout-close"]
_METHODS = ["initialize", "tools/list", "resources/read", "tools/call", "resources/list",
            "resources/subscribe"]
_SCHEMAS = ["schema-null", "schema-string", "schema-props-list", "schema-required-str",
            "schema-no-name", "schema-name-int", "schema-name-empty", "schema-name-nul",
            "schema-name-long", "schema-dup", "schema-many", "schema-tools-dict",
            "schema-tools-null", "schema-desc-obj", "schema-deep", "schema-surrogate"]


def _fake_gateway(d: Path, mode: str, timeout_s: float) -> tuple[Path, Path]:
    """A gateway manifest in ``d`` in front of :mod:`fake_upstream` in ``mode``; its driver."""
    shutil.copy(_FAKE, d / "fake.py")
    doc = _gateway_doc()
    doc["upstreams"]["notes"].update(command=sys.executable, args=["fake.py", mode],
                                    timeout_s=timeout_s)
    doc["trace"] = "trace.jsonl"
    doc["store"] = {"backend": "sqlite", "path": "facts"}
    man = d / "gw.yaml"
    man.write_text(yaml.safe_dump(doc))
    drv = d / "drive.py"
    drv.write_text(_DRIVER)
    return man, drv


def gw_upstream(b: Builder, per_seed: int = 40) -> None:
    """A gateway in front of an upstream that misbehaves at one request."""
    modes = [f"{m}:{h}" for m in _METHODS for h in _MISBEHAVE]
    picked = b.rng.sample(modes, min(per_seed - 8, len(modes)))
    picked += [f"tools/list:{s}" for s in b.rng.sample(_SCHEMAS, 8)]
    for mode in sorted(picked):
        cid = f"gwup/{mode}"
        d = b._dir(cid)
        (d / "keep.txt").write_text("the user's own file\n")
        man, drv = _fake_gateway(d, mode, 5)
        b.cases.append(driver_case(cid, "gw-upstream", d, man, drv))


def driver_case(cid: str, family: str, d: Path, man: Path, drv: Path) -> Case:
    """The case running the client ``drv`` against the gateway of manifest ``man``."""
    return Case(cid, family, ["PY", f"import runpy, sys; sys.argv = [{str(drv)!r}, "
                              f"{str(man)!r}, {str(d / 'trace.jsonl')!r}]; "
                              f"runpy.run_path({str(drv)!r}, run_name='__main__')"],
                inputs=[man, d / "fake.py", d / "keep.txt"], names=[], timeout=300,
                ok_codes=(0,))


# ------------------------------------------------------------------------- gw-flags
_HTTP = ["", ":", "127.0.0.1", "127.0.0.1:99999", "127.0.0.1:-1", "[::1", "host:abc",
         "256.1.1.1:80", "127.0.0.1:0 x", "\udcff:1", "127.0.0.1:1e3", "127.0.0.1:\u0661",
         "no-such-host.invalid:0", "http://127.0.0.1:0", "[::1]:abc", "127.0.0.1:+80"]
_LEVEL = ["bogus", "", "10", "\udcff", "debug ", "-1", "CRITICAL+1"]


def gw_flags(b: Builder) -> None:
    """``icore mcp --http/--log-level`` values, and trace paths aimed at the inputs."""
    base = b._dir("gwflags/base")
    shutil.copy(_UPSTREAM, base)
    doc = _gateway_doc()
    doc.pop("store")
    doc["trace"] = "trace.jsonl"
    man = base / "gw.yaml"
    man.write_text(yaml.safe_dump(doc))
    vals = [("--http", v) for v in _HTTP] + [("--log-level", v) for v in _LEVEL]
    for flag, v in sorted(b.rng.sample(vals, min(14, len(vals)))):
        cid = f"gwflags/{flag}={v!r}"
        b._dir(cid)
        printf = "".join(f"\\{c:03o}" for c in os.fsencode(v))
        b.cases.append(Case(cid, "gw-flags",
                            ["sh", "-c", 'v=$(printf "$1"); exec "$ICORE_PY" -m icore mcp '
                             f'{man} {flag} "$v" </dev/null', "sh", printf],
                            inputs=[man, base / "notes_server.py"], names=[flag],
                            timeout=60, ok_codes=(1, 2) if flag == "--http" else (0, 1, 2)))

    busy = b._dir("gwflags/http-busy")
    code = ("import os, socket, sys\ns = socket.socket(); s.bind(('127.0.0.1', 0)); s.listen()\n"
            "os.set_inheritable(s.fileno(), True)\n"
            "os.execv(sys.executable, [sys.executable, '-m', 'icore', 'mcp', sys.argv[1], "
            "'--http', f'127.0.0.1:{s.getsockname()[1]}'])\n")
    (busy / "hold.py").write_text(code)
    b.cases.append(Case("gwflags/http-busy", "gw-flags",
                        ["sh", "-c", f'exec "$ICORE_PY" {busy / "hold.py"} {man} </dev/null'],
                        inputs=[man], names=["--http", "127.0.0.1"], timeout=60,
                        ok_codes=(1, 2)))

    def link_to(target: str) -> Any:
        return lambda d: (d / "t.jsonl").symlink_to(d / target)

    def hardlink_to(target: str) -> Any:
        return lambda d: os.link(d / target, d / "t.jsonl")

    def ro_dir(d: Path) -> None:
        (d / "ro").mkdir()
        (d / "ro").chmod(0o500)

    traces: dict[str, tuple[str, Any]] = {
        "link-manifest": ("t.jsonl", link_to("gw.yaml")),
        "link-upstream": ("t.jsonl", link_to("notes_server.py")),
        "link-user": ("t.jsonl", link_to("keep.txt")),
        "hardlink-manifest": ("t.jsonl", hardlink_to("gw.yaml")),
        "hardlink-user": ("t.jsonl", hardlink_to("keep.txt")),
        "dotdot-manifest": ("sub/../gw.yaml", lambda d: (d / "sub").mkdir()),
        "under-file": ("keep.txt/t.jsonl", None),
        "read-only-dir": ("ro/t.jsonl", ro_dir),
        "dot": (".", None), "empty": ("", None), "home": ("~/t.jsonl", None),
        "link-dir": ("t.jsonl", lambda d: (d / "t.jsonl").symlink_to(d)),
        "store-file": ("facts/x", None),
    }
    for name, (path, prep) in sorted(traces.items()):
        cid = f"gwflags/trace-{name}"
        d = b._dir(cid)
        shutil.copy(_UPSTREAM, d)
        (d / "keep.txt").write_text("the user's own file\n")
        doc = _gateway_doc()
        doc["trace"] = path
        doc["store"] = {"backend": "sqlite", "path": "facts"}
        p = d / "gw.yaml"
        p.write_text(yaml.safe_dump(doc))
        if prep is not None:
            prep(d)
        b.cases.append(Case(cid, "gw-flags", ["sh", "-c", f'exec "$ICORE_PY" -m icore mcp {p} '
                                              "</dev/null"],
                            inputs=[p, d / "notes_server.py", d / "keep.txt"],
                            names=["trace"], timeout=90, ok_codes=(0, 1, 2)))


# ------------------------------------------------------------------------- rec-edit
_RECORDER = """
import sys
from icore.integrations import RunRecorder
rec = RunRecorder('r\u00e9c', question='Book a room \u2603', agents={'planner': 'plans',
                                                                   'booker': 'books'},
                  ground_truth='R101')
rec.add('user', 'task', 'Book a room for 2')
rec.add('planner', 'plan', 'check prices then book')
rec.tool_call('booker', 'price', {'room': 'R101'}, 120, at=1.5)
rec.add('booker', 'thought', 'price ok', pause=True)
rec.tool_call('booker', 'book', {'room': 'R101', 'n': 2}, 'booked R101')
rec.add('booker', 'output', 'Booked R101', terminates=True)
rec.write(sys.argv[1])
"""


def _edits(raw: bytes, rng: random.Random, other: bytes) -> dict[str, bytes]:
    lines = raw.splitlines(keepends=True)
    i = rng.randrange(len(lines))
    j = rng.randrange(len(lines))
    swapped = list(lines)
    swapped[i], swapped[j] = swapped[j], swapped[i]
    ol = other.splitlines(keepends=True)
    inter = [x for pair in zip(lines, ol, strict=False) for x in pair]
    cut = rng.randrange(1, len(raw))
    deep_line = b'{"agent": "a", "kind": "thought", "content": ' + b"[" * 60_000 + \
        b"]" * 60_000 + b"}\n"
    huge_line = b'{"agent": "a", "kind": "thought", "content": "' + b"x" * (20 << 20) + b'"}\n'
    return {
        "truncated": raw[:cut], "concatenated": raw + other, "concat-no-newline":
        raw.rstrip(b"\n") + other, "dup-line": b"".join([*lines[:i + 1], *lines[i:]]),
        "all-doubled": b"".join(x for x in lines for _ in (0, 1)), "swapped":
        b"".join(swapped), "reversed": b"".join(reversed(lines)), "crlf":
        raw.replace(b"\n", b"\r\n"), "bom": b"\xef\xbb\xbf" + raw, "bom-each-line":
        b"".join(b"\xef\xbb\xbf" + x for x in lines), "nul": raw[:cut] + b"\x00" + raw[cut:],
        "nul-line": b"".join([*lines[:i], b"\x00" * 64 + b"\n", *lines[i:]]),
        "deep": b"".join([*lines[:i], deep_line, *lines[i:]]),
        "u2028": raw.replace(b'", "', '\u2028", "'.encode(), 1),
        "huge-line": b"".join([*lines[:i], huge_line, *lines[i:]]),
        "interleaved": b"".join(inter), "first-dropped": b"".join(lines[1:]),
        "blank-lines": b"\n\n".join(x.rstrip(b"\n") for x in lines) + b"\n",
        "latin1": raw.decode("utf-8").encode("latin-1", "replace"),
        "utf16": raw.decode("utf-8").encode("utf-16"),
        "cr-only": raw.replace(b"\n", b"\r"),
    }


def _field_edits(raw: bytes, rng: random.Random, n: int) -> dict[str, bytes]:
    rows = [json.loads(x) for x in raw.splitlines() if x.strip()]
    out: dict[str, bytes] = {}
    pairs = [(i, k) for i, r in enumerate(rows) if isinstance(r, dict) for k in r]
    for i, k in rng.sample(pairs, min(n, len(pairs))):
        v = rng.choice(BAD)
        doc = copy.deepcopy(rows)
        doc[i][k] = v
        try:
            limit = sys.get_int_max_str_digits()
            sys.set_int_max_str_digits(0)
            text = "\n".join(dumps(x) for x in doc) + "\n"
        finally:
            sys.set_int_max_str_digits(limit)
        out[f"field-{i}-{k}={str(v)[:10]!r}"] = text.encode("utf-8", "surrogatepass")
    return out


def rec_edit(b: Builder, gw_trace: Path | None, per_seed: int = 45) -> None:
    """Recordings icore wrote, edited by hand, audited."""
    import subprocess
    d0 = b._dir("recedit/base")
    rec = d0 / "rec.jsonl"
    subprocess.run([sys.executable, "-c", _RECORDER, str(rec)], check=True, timeout=120,
                   capture_output=True)
    sources = {"recorder": rec.read_bytes()}
    if gw_trace is not None and gw_trace.is_file() and gw_trace.stat().st_size:
        sources["gateway"] = gw_trace.read_bytes()
    cases: list[tuple[str, str, bytes]] = []
    for src, raw in sources.items():
        other = sources["gateway" if src == "recorder" and "gateway" in sources else
                        "recorder"]
        rng = random.Random(f"{src}{b.rng.random()}")
        cases += [(src, k, v) for k, v in _edits(raw, rng, other).items()]
        cases += [(src, k, v) for k, v in _field_edits(raw, rng, 12).items()]
    for src, edit, data in sorted(b.rng.sample(cases, min(per_seed, len(cases)))):
        cid = f"recedit/{src}/{edit}"
        d = b._dir(cid)
        p = d / ("trace.jsonl" if src == "gateway" else "run.jsonl")
        p.write_bytes(data)
        argv = ["ICORE", "audit", str(p), "-o", str(d / "o"), "--json", str(d / "s.json")]
        b.cases.append(Case(cid, "rec-edit", argv, inputs=[p], names=[p.name],
                            timeout=120, ok_codes=(0, 1)))


# ------------------------------------------------------------------------- out-paths
def _user_folder(d: Path) -> list[Path]:
    (d / "mine").mkdir()
    files = [d / "mine" / "index.html", d / "mine" / "notes.txt", d / "mine" / "run.json",
             d / "mine" / "icore.sqlite", d / "mine" / "summary.json"]
    for f in files:
        f.write_text(f"the user's own {f.name}\n")
    (d / "mine" / "certs").mkdir()
    (d / "mine" / "certs" / "ca.crt").write_text("the user's own cert\n")
    return [*files, d / "mine" / "certs" / "ca.crt"]


def out_paths(b: Builder) -> None:
    """Every writing command aimed at its own input or at the user's files."""
    rows = seeds.jsonl_rows()
    targets: dict[str, Any] = {
        "input": lambda d, t: str(t),
        "input-link": lambda d, t: (d / "ln").symlink_to(t) or str(d / "ln"),
        "input-hardlink": lambda d, t: os.link(t, d / "hl") or str(d / "hl"),
        "input-dotdot": lambda d, t: (d / "sub").mkdir() or str(d / "sub" / ".." / t.name),
        "input-dir": lambda d, t: str(t.parent),
        "user-dir": lambda d, t: str(d / "mine"),
        "user-dir-link": lambda d, t: (d / "lnd").symlink_to(d / "mine") or str(d / "lnd"),
        "user-file": lambda d, t: str(d / "mine" / "notes.txt"),
        "under-user-file": lambda d, t: str(d / "mine" / "notes.txt" / "x"),
        "parent-dir": lambda d, t: str(d),
        "dev-full": lambda d, t: "/dev/full",
    }
    commands: dict[str, Any] = {
        "audit-o": lambda t, o: ["ICORE", "audit", str(t), "-o", o],
        "audit-json": lambda t, o: ["ICORE", "audit", str(t), "--no-report", "--json", o],
        "audit-otlp": lambda t, o: ["ICORE", "audit", str(t), "--no-report",
                                    "--otlp-endpoint", f"file:{o}"],
        "audit-o-single": lambda t, o: ["ICORE", "audit", str(t), "-o", o, "--single-file"],
        "audit-prov": lambda t, o: ["ICORE", "audit", str(t), "-o", o, "--prov"],
        "run-out": lambda t, o: ["ICORE", "run", "--out", o, "--seeds", "0"],
        "demo-out": lambda t, o: ["ICORE", "demo", "--out", o, "--no-live"],
        "certs-dir": lambda t, o: ["ICORE", "certs", "init", "--dir", o, "--agent", "a"],
        "bench-import-json": lambda t, o: ["ICORE", "bench", "import", "--otlp-mb", "0.01",
                                           "--phoenix-mb", "0.01", "--langfuse-mb", "0.01",
                                           "--jsonl-lines", "10", "--repeats", "1",
                                           "--json", o],
        "recorder-write": lambda t, o: ["PY", "from icore.integrations import RunRecorder\n"
                                        "from icore.errors import IcoreError\nimport sys\n"
                                        "r = RunRecorder()\nr.add('u', 'task', 'q')\ntry:\n"
                                        f"    r.write({o!r})\nexcept IcoreError as e:\n"
                                        "    print('TYPED', e); sys.exit(1)\n"],
    }
    # two outputs of one command that are one file
    both = {
        "json-is-report": lambda t, d: ["ICORE", "audit", str(t), "-o", str(d / "o"),
                                        "--json", str(d / "o" / "index.html")],
        "json-is-otlp": lambda t, d: ["ICORE", "audit", str(t), "--no-report", "--json",
                                      str(d / "x.json"), "--otlp-endpoint",
                                      f"file:{d / 'x.json'}"],
        "otlp-is-report": lambda t, d: ["ICORE", "audit", str(t), "-o", str(d / "o"),
                                        "--otlp-endpoint", f"file:{d / 'o' / 'index.html'}"],
        "json-is-run-report": lambda t, d: ["ICORE", "audit", str(t), "-o", str(d / "o"),
                                            "--json", str(d / "o" / "r1.html")],
        "json-is-out": lambda t, d: ["ICORE", "audit", str(t), "-o", str(d / "o"),
                                     "--json", str(d / "o")],
        "run-otlp-in-out": lambda t, d: ["ICORE", "run", "--seeds", "0", "--out",
                                         str(d / "o"), "--otlp-endpoint",
                                         f"file:{d / 'o' / 'run.json'}"],
        "prov-json": lambda t, d: ["ICORE", "audit", str(t), "-o", str(d / "o"), "--prov",
                                   "--json", str(d / "o" / "r1.prov.json")],
    }
    for name in sorted(b.rng.sample(sorted(both), 4)):
        cid = f"outp/both/{name}"
        d = b._dir(cid)
        t = b.write_doc(d, "t.jsonl", "jsonl", rows)
        user = _user_folder(d)
        b.cases.append(Case(cid, "out-paths", both[name](t, d), inputs=[t, *user],
                            names=["--json", "--otlp-endpoint", "-o", "--out", "index.html",
                                   "r1", "o"],
                            timeout=400, ok_codes=(0, 1, 2)))
    pairs = [(c, t) for c in commands for t in targets]
    for cmd, tgt in sorted(b.rng.sample(pairs, min(40, len(pairs)))):
        cid = f"outp/{cmd}/{tgt}"
        d = b._dir(cid)
        t = b.write_doc(d, "t.jsonl", "jsonl", rows)
        user = _user_folder(d)
        o = targets[tgt](d, t)
        argv = commands[cmd](t, o)
        slow = cmd in ("run-out", "demo-out", "bench-import-json")
        b.cases.append(Case(cid, "out-paths", argv, inputs=[t, *user],
                            names=[o, Path(o).name, "--out", "-o", "--json", "--dir", "path",
                                   "otlp", "OTLP"],
                            timeout=400 if slow else 120, ok_codes=(0, 1, 2)))


# ------------------------------------------------------------------------- rec-values
_REC_VALUES: dict[str, str] = {
    "nan": "float('nan')", "inf": "float('-inf')", "bytes": "b'\\xff'", "object": "object()",
    "bad-repr": "Weird()", "deep": "DEEP", "generator": "(i for i in range(3))",
    "set": "{1, 2}", "huge-int": "10**5000", "surrogate": "'a\\ud800'",
    "decimal": "decimal.Decimal('1.5')", "int-keys": "{1: 2}", "cycle": "CYCLE",
    "nul": "'a\\x00b'", "mb-string": "'x' * (8 << 20)", "exception": "ValueError('x')",
    "type": "int", "bad-key": "{Weird(): 1}",
}
_REC_CALLS: dict[str, str] = {
    "add.content": "r.add('a', 'thought', V)", "add.agent": "r.add(V, 'thought', 'x')",
    "add.kind": "r.add('a', V, 'x')", "add.at": "r.add('a', 'thought', 'x', at=V)",
    "add.field": "r.add('a', 'thought', 'x', extra=V)",
    "add.pause": "r.add('a', 'thought', 'x', pause=V)",
    "tool.args": "r.tool_call('a', 't', {'x': V}, 1)",
    "tool.args-map": "r.tool_call('a', 't', V, 1)",
    "tool.result": "r.tool_call('a', 't', {'x': 1}, V)",
    "tool.tool": "r.tool_call('a', V, {'x': 1}, 1)",
    "tool.at": "r.tool_call('a', 't', {'x': 1}, 1, at=V)",
    "ctor.run_id": "r = RunRecorder(V)", "ctor.question": "r = RunRecorder('r', question=V)",
    "ctor.ground_truth": "r = RunRecorder('r', ground_truth=V)",
    "ctor.agents": "r = RunRecorder('r', agents={'a': V})",
    "ctor.succeeded": "r = RunRecorder('r', succeeded=V)",
    "write.path": "r.write(V)",
}
_REC_HEAD = """
import decimal, os, sys
from icore.errors import IcoreError
from icore.integrations import RunRecorder
class Weird:
    def __repr__(self):
        raise RuntimeError('repr')
    __str__ = __repr__
    def __hash__(self):
        return 1
DEEP = []
for _ in range(5000):
    DEEP = [DEEP]
CYCLE = []
CYCLE.append(CYCLE)
r = RunRecorder('r')
r.add('u', 'task', 'q')
try:
    {call}
    p = r.write(os.path.join(sys.argv[1], 'run.jsonl'))
except IcoreError as e:
    print('TYPED', type(e).__name__, e); sys.exit(1)
os.execv(sys.executable, [sys.executable, '-m', 'icore', 'audit', str(p), '--no-report'])
"""


def rec_values(b: Builder, per_seed: int = 40) -> None:
    """RunRecorder calls given values a trace line cannot hold as they are, then audited."""
    pairs = [(c, v) for c in _REC_CALLS for v in _REC_VALUES]
    for call, val in sorted(b.rng.sample(pairs, min(per_seed, len(pairs)))):
        cid = f"recval/{call}={val}"
        d = b._dir(cid)
        code = _REC_HEAD.replace("{call}", _REC_CALLS[call].replace("V", _REC_VALUES[val]))
        b.cases.append(Case(cid, "rec-values", ["sh", "-c", f'exec "$ICORE_PY" -c "$1" {d}',
                                                "sh", code],
                            names=[call.split(".")[-1], "argument", "run.jsonl"],
                            timeout=90, ok_codes=(0, 1)))


def gateway_trace(work: Path) -> Path | None:
    """A trace the gateway wrote in a short good session (the seed of ``rec-edit``)."""
    import subprocess
    d = work / "seed-gw"
    d.mkdir(parents=True, exist_ok=True)
    man, drv = _fake_gateway(d, "none:none", 10)
    subprocess.run([sys.executable, str(drv), str(man), str(d / "trace.jsonl")],
                   capture_output=True, timeout=300)
    return d / "trace.jsonl" if (d / "trace.jsonl").is_file() else None


def all_families(b: Builder, work: Path) -> None:
    """Every family of this module."""
    wrap_odd(b)
    gw_upstream(b)
    gw_flags(b)
    rec_edit(b, gateway_trace(work))
    out_paths(b)
    rec_values(b)


__all__ = ["all_families"]
