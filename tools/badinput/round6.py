"""Bad inputs of this round's features the first five rounds did not reach (issue 29, round 6).

Families, each generated from the sweep's seed (sampled where the product is large):

- ``fence-args``: the high-level fence API (``Agent.execute`` / ``aexecute``) with the
  user's own tools: odd signatures (defaults, ``*args``/``**kw``, keyword- and
  positional-only, pydantic models, dataclasses, enums, ``TypedDict``, ``NamedTuple``,
  ``Literal``, constrained fields, dates, decimals, UUIDs, bytes, sets, tuples, dicts with
  int keys, async tools, callable objects, ``functools.partial``) called with odd
  arguments (date/datetime/Decimal/enum/bytes/set values, NaN, infinities, 10^400, a
  5000-deep list, 1 MB strings, non-str keys at the top and nested, objects, generators)
  and odd ``depends_on``; a subset makes the fact stale first: nothing may run then.
- ``approvals``: ``Agent.execute(approve=...)``, ``ApprovalBook.resolve`` and LangGraph's
  ``approval=True`` resumed with wrong, forged, expired (the fact changed while the human
  decided), duplicated or odd answers (ids of another request, ``"approved": "true"``,
  objects whose ``str`` raises, mappings whose ``get`` raises). A call may run only under
  a genuine approval of exactly that request.
- ``rec-replay``: a recording of a LangGraph app on the workspace (a stale refusal, a
  replan, an approval) edited as a user might (truncated, lines reordered, duplicated,
  dropped, a gate line's field given a wrong type) and audited with ``--fail-on``.
- ``cli-combos``: ``icore`` subcommands with hostile flag combinations and paths (an
  output that is a FIFO, a folder, a link to an input, in a read-only folder, under
  ``/proc``, 255+ bytes, unicode; flags that cannot apply together).
- ``gw-manifest``: gateway manifests whose ``depends_on``/``writes`` templates, owners,
  facts, names, caps and client tokens are odd, driven through a real session.
- ``concurrent``: two processes at once on one output, trace, store or certs folder; the
  result must be whole (parsable, signed by the CA beside it, no lost update).
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from . import seeds
from .cases import Builder, Case, dumps
from .round5 import _fake_gateway, driver_case

# ------------------------------------------------------------------------- fence-args
_FA_HEAD = """
import sys, asyncio, math, datetime, decimal, enum, uuid, dataclasses, functools, typing
from collections import OrderedDict
from types import MappingProxyType
sys.setrecursionlimit(20_000)
from pydantic import BaseModel, Field
from icore.errors import IcoreError
from icore.workspace import Workspace
ws = Workspace({'k/*': 'o'}); ws.put('k/1', {'v': 1})
ag = ws.agent('a')
ag.read('k/1')
RAN = []
class Color(enum.Enum):
    RED = 'red'
    BLUE = 2
class P(BaseModel):
    city: str
    when: datetime.date | None = None
@dataclasses.dataclass
class D:
    city: str
    n: int = 1
class TD(typing.TypedDict):
    city: str
class NT(typing.NamedTuple):
    city: str
    n: int
class Weird:
    def __repr__(self):
        raise RuntimeError('repr')
    __str__ = __repr__
class BadMap(dict):
    def __getitem__(self, k):
        raise RuntimeError('getitem')
    def items(self):
        raise RuntimeError('items')
DEEP = []
for _ in range(5000):
    DEEP = [DEEP]
def gen():
    yield 1
"""

_FA_TOOLS: dict[str, str] = {
    "plain": "def T(x: str, n: int = 1):\n    RAN.append(x); return f'{x} {n}'\n",
    "any": "def T(x: typing.Any):\n    RAN.append(x); return 'ok'\n",
    "no-annot": "def T(x):\n    RAN.append(x); return 'ok'\n",
    "mutable-default": "def T(x: str = 'a', tags: list = []):\n    RAN.append(x); "
                       "tags.append(1); return str(tags)\n",
    "object-default": "def T(x: str = object()):\n    RAN.append(x); return 'ok'\n",
    "star": "def T(*args, **kw):\n    RAN.append(kw); return str(kw)[:50]\n",
    "kw-only": "def T(*, x: str):\n    RAN.append(x); return x\n",
    "pos-only": "def T(x: str, /):\n    RAN.append(x); return x\n",
    "pydantic": "def T(x: P):\n    RAN.append(x); return x.city\n",
    "dataclass": "def T(x: D):\n    RAN.append(x); return str(x)\n",
    "enum": "def T(x: Color):\n    RAN.append(x); return str(x)\n",
    "date": "def T(x: datetime.date):\n    RAN.append(x); return str(x)\n",
    "datetime": "def T(x: datetime.datetime):\n    RAN.append(x); return str(x)\n",
    "decimal": "def T(x: decimal.Decimal):\n    RAN.append(x); return str(x)\n",
    "uuid": "def T(x: uuid.UUID):\n    RAN.append(x); return str(x)\n",
    "bytes": "def T(x: bytes):\n    RAN.append(x); return 'ok'\n",
    "set": "def T(x: set[int]):\n    RAN.append(x); return str(sorted(x))\n",
    "frozenset": "def T(x: frozenset[str]):\n    RAN.append(x); return 'ok'\n",
    "tuple": "def T(x: tuple[int, ...]):\n    RAN.append(x); return str(x)\n",
    "int-keys": "def T(x: dict[int, str]):\n    RAN.append(x); return str(x)\n",
    "typeddict": "def T(x: TD):\n    RAN.append(x); return 'ok'\n",
    "namedtuple": "def T(x: NT):\n    RAN.append(x); return 'ok'\n",
    "literal": "def T(x: typing.Literal['a', 'b']):\n    RAN.append(x); return x\n",
    "constrained": "def T(x: typing.Annotated[int, Field(gt=0, lt=10)]):\n"
                   "    RAN.append(x); return str(x)\n",
    "float": "def T(x: float):\n    RAN.append(x); return str(x)\n",
    "optional": "def T(x: int | None = None):\n    RAN.append(x); return str(x)\n",
    "async": "async def T(x: str):\n    RAN.append(x); return x\n",
    "callable-obj": "class K:\n    def __call__(self, x: str):\n        RAN.append(x); "
                    "return x\nT = K()\n",
    "partial": "def _f(x: str, y: int):\n    RAN.append(x); return x\n"
               "T = functools.partial(_f, y=1)\n",
    "returns-odd": "def T(x: typing.Any):\n    RAN.append(x); return {1: {2}, 'b': b'\\xff', "
                   "'n': math.nan}\n",
    "raises": "def T(x: typing.Any):\n    RAN.append(x); raise ValueError('the tool broke')\n",
}

_FA_VALUES: dict[str, str] = {
    "str": "'Porto'", "date": "datetime.date(2026, 1, 2)",
    "datetime-naive": "datetime.datetime(2026, 1, 2, 3, 4)",
    "datetime-tz": "datetime.datetime(2026, 1, 2, tzinfo=datetime.timezone.utc)",
    "decimal": "decimal.Decimal('1.50')", "decimal-nan": "decimal.Decimal('NaN')",
    "decimal-huge": "decimal.Decimal('1e999999')", "enum": "Color.RED", "enum-int": "Color.BLUE",
    "bytes": "b'\\xff\\x00'", "set": "{3, 1, 2}", "frozenset": "frozenset({'a'})",
    "tuple": "(1, 2)", "nan": "math.nan", "inf": "-math.inf", "huge-int": "10**400",
    "int-5000": "10**5000", "deep": "DEEP", "mb": "'x' * (1 << 20)",
    "int-keys": "{1: 'a'}", "tuple-keys": "{(1, 2): 'a'}", "nested-int-keys": "[{1: {2: 3}}]",
    "none-key": "{None: 1}", "object": "object()", "weird": "Weird()", "generator": "gen()",
    "pydantic": "P(city='Porto')", "dataclass": "D('Porto')", "namedtuple": "NT('a', 1)",
    "uuid": "uuid.UUID(int=7)", "complex": "1j", "range": "range(3)", "type": "int",
    "lambda": "(lambda: 1)", "bool": "True", "none": "None", "surrogate": "'a\\ud800'",
    "dict-in-list": "[{'a': math.inf}]", "str-subclass": "type('S', (str,), {})('Porto')",
    "int-subclass": "type('I', (int,), {})(3)", "float-subclass": "type('F', (float,), {})(1.5)",
}

_FA_ARGS: dict[str, str] = {
    "x": "{'x': V}", "non-str-key": "{1: V}", "extra": "{'x': V, 'zz': V}",
    "empty-key": "{'x': V, '': 1}", "ordered": "OrderedDict(x=V)",
    "proxy": "MappingProxyType({'x': V})", "badmap": "BadMap(x=V)",
    "many-keys": "{'x': V, **{f'k{i}': i for i in range(100_000)}}", "list": "[('x', V)]",
    "kwargs-key": "{'x': V, 'kwargs': 1}",
}

_FA_DEPS: dict[str, str] = {
    "set": "{'k/1'}", "from-args": "lambda a: {'k/' + str(a.get('x'))[:3]}",
    "fn-list": "lambda a: ['k/1']", "fn-generator": "lambda a: (k for k in ['k/1'])",
    "fn-raises": "lambda a: {a['nope']}", "str": "'k/1'", "dict": "{'k/1': 1}",
    "unowned": "{'zz/1'}", "bytes-key": "{b'k/1'}", "int-key": "{1}",
}

_FA_CALL = """
ARGS = {args}
try:
    if {stale}:
        ws.put('k/1', {{'v': 2}})
    if asyncio.iscoroutinefunction(T):
        call = asyncio.run(ag.aexecute('t', T, ARGS, depends_on={deps}))
    else:
        call = ag.execute('t', T, ARGS, depends_on={deps})
except IcoreError as e:
    print('TYPED', type(e).__name__, str(e)[:600]); sys.exit(1)
except Exception as e:
    # the user's tool raising once authorized is documented (it gets the JSON arguments)
    import traceback
    tb = traceback.extract_tb(e.__traceback__)
    if RAN and tb and tb[-1].filename == '<string>':
        print('TOOL-RAISED', type(e).__name__); sys.exit(0)
    raise
print('CALL', call.executed, call.reason, ascii(str(call.message))[:300])
if {stale} and RAN:
    print('ACCEPTED a stale call ran:', ascii(RAN)[:200]); sys.exit(0)
"""


def fence_args(b: Builder, per_seed: int = 45) -> None:
    """User tools of odd signatures x odd values x argument shapes x ``depends_on``.

    Two thirds of the sample is the value x signature product with well-formed argument
    shapes and ``depends_on`` (else most cases stop at the shape), the rest the whole
    product.
    """
    plain = [(t, v, "x", "set", s) for t in _FA_TOOLS for v in _FA_VALUES for s in (False, True)]
    combos = [(t, v, a, d, s) for t in _FA_TOOLS for v in _FA_VALUES for a in _FA_ARGS
              for d in _FA_DEPS for s in (False, True)]
    n_plain = per_seed * 2 // 3
    picked = set(b.rng.sample(plain, n_plain))
    picked |= set(b.rng.sample(combos, per_seed - n_plain))
    for t, v, a, d, s in sorted(picked):
        cid = f"fargs/{t}/{v}/{a}/{d}/{'stale' if s else 'fresh'}"
        b._dir(cid)
        code = (_FA_HEAD + _FA_TOOLS[t] + _FA_CALL.format(
            args=_FA_ARGS[a].replace("V", _FA_VALUES[v]), deps=_FA_DEPS[d], stale=s))
        b.cases.append(Case(cid, "fence-args", ["PY", code],
                            names=["args", "depends_on", "argument", "'x'", "key", "fn",
                                   "action", "x="],
                            timeout=120, ok_codes=(0, 1), refusal=True))


# ------------------------------------------------------------------------- approvals
_AP_HEAD = """
import sys, math, asyncio
from collections.abc import Mapping
from icore.errors import IcoreError
from icore.workspace import ApprovalBook, ApprovalRequest, Workspace
ws = Workspace({'k/*': 'o'}); ws.put('k/1', {'v': 1})
ag = ws.agent('a')
ag.read('k/1')
RAN = []
def T(x: str):
    RAN.append(x); return 'done ' + x
class Weird:
    def __str__(self):
        raise RuntimeError('str')
    __repr__ = __str__
    def __bool__(self):
        raise RuntimeError('bool')
    def __eq__(self, o):
        raise RuntimeError('eq')
    __hash__ = object.__hash__
class BadMapping(Mapping):
    def __getitem__(self, k):
        raise RuntimeError('getitem')
    def __iter__(self):
        raise RuntimeError('iter')
    def __len__(self):
        return 1
    def get(self, k, d=None):
        raise RuntimeError('get')
class StrYes(str):
    def strip(self):
        return 'no'
OTHER = ApprovalRequest.of('t', {'x': 'Lisbon'}, {'k/1': '0' * 64})
GENUINE = False
"""

_AP_ANSWERS: dict[str, tuple[str, bool]] = {
    # name: (expression of the answer given the request ``r``, genuine approval)
    "true": ("True", True), "approve": ("r.approve()", True), "yes": ("'yes'", True),
    "forged-id": ("{'planfence.approval': 'f' * 64, 'approved': True}", False),
    "other-request": ("OTHER.approve()", False),
    "approved-str": ("{'planfence.approval': r.id, 'approved': 'true'}", False),
    "approved-int": ("{'planfence.approval': r.id, 'approved': 1}", False),
    "id-int": ("{'planfence.approval': 7, 'approved': True}", False),
    "id-list": ("{'planfence.approval': [r.id], 'approved': True}", False),
    "reason-weird": ("{'planfence.approval': r.id, 'approved': False, 'reason': Weird()}", False),
    "reason-huge": ("{'planfence.approval': r.id, 'approved': False, 'reason': 'x' * 10**6}",
                    False),
    "weird": ("Weird()", False), "bad-mapping": ("BadMapping()", False),
    # a str subclass is read as its text (its own strip() is not asked): "yes" approves
    "str-subclass": ("StrYes('yes')", True), "nan": ("math.nan", False), "one": ("1", False),
    "bytes": ("b'yes'", False), "list": ("['yes']", False), "none": ("None", False),
    "yes-nul": ("'yes\\x00'", False), "fullwidth": ("'\\uff59\\uff45\\uff53'", False),
    "type-accept": ("{'type': 'accept'}", True), "type-weird": ("{'type': Weird()}", False),
    "reject": ("r.reject('no way')", False), "reject-then": ("{'approved': False, "
                                                             "'planfence.approval': r.id, "
                                                             "'reason': None}", False),
}

_AP_EXECUTE = """
def F(r):
    {before}
    return {{answer}}
try:
    call = ag.execute('t', T, {{{{'x': 'Porto'}}}}, depends_on={{{{'k/1'}}}}, approve=F)
except IcoreError as e:
    print('TYPED', type(e).__name__, str(e)[:500]); sys.exit(1)
print('CALL', call.executed, call.reason)
"""

_AP_MODES: dict[str, str] = {
    "execute": _AP_EXECUTE.format(before="pass"),
    # the fact changes while the human decides: the approval is stale, nothing may run
    "expired": "\nGENUINE = False" + _AP_EXECUTE.format(before="ws.put('k/1', {{'v': 2}})"),
    # the same answer delivered twice: the second call is a new request, asked again;
    # an answer naming the first request's id never approves the second
    "duplicate": """
ANS = []
def F(r):
    if not ANS:
        ANS.append({answer})
    return ANS[0]
try:
    c1 = ag.execute('t', T, {{'x': 'Porto'}}, depends_on={{'k/1'}}, approve=F)
    ag.read('k/1')
    c2 = ag.execute('t', T, {{'x': 'Lisbon'}}, depends_on={{'k/1'}}, approve=F)
except IcoreError as e:
    print('TYPED', type(e).__name__, str(e)[:500]); sys.exit(1)
print('CALLS', c1.executed, c2.executed)
NAMED = isinstance(ANS[0], dict) and ('planfence.approval' in ANS[0] or 'id' in ANS[0])
if 'Lisbon' in RAN and NAMED:
    print('ACCEPTED an approval naming another request ran Lisbon'); sys.exit(0)
RAN[:] = [x for x in RAN if x != 'Lisbon']
""",
    # a replaying framework: the book attributes answers by index and id
    "book": """
book = ApprovalBook(max_calls=2)
r = ApprovalRequest.of('t', {{'x': 'Porto'}}, {{'k/1': 'a' * 64}})
old = ApprovalRequest.of('t', {{'x': 'Porto'}}, {{'k/1': 'b' * 64}})
book.note('c1', old)
answers = iter([{answer}, {answer}, {answer}])
def ask(payload):
    try:
        return next(answers)
    except StopIteration:
        raise KeyboardInterrupt
try:
    v = book.resolve('c1', r, ask)
except KeyboardInterrupt:
    print('ASKED-AGAIN'); sys.exit(0)
except IcoreError as e:
    print('TYPED', type(e).__name__, str(e)[:500]); sys.exit(1)
print('VERDICT', v.approved)
if v.approved:
    RAN.append('book')
""",
    # LangGraph approval=True resumed with the answer (the real interrupt / Command path)
    "langgraph": """
from typing import Annotated, TypedDict
from langgraph.graph import StateGraph, START, END
from langgraph.graph.message import add_messages
from langgraph.prebuilt import ToolNode
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command
from langchain_core.messages import AIMessage
from langchain_core.tools import tool
from icore.integrations.langgraph import fenced_tool
@tool
def ship(x: str) -> str:
    '''Ship.'''
    RAN.append(x); return 'shipped ' + x
@tool
def look() -> dict:
    '''Read.'''
    return ag.read('k/1')
class S(TypedDict, total=False):
    messages: Annotated[list, add_messages]
W = fenced_tool(ship, agent=ag, depends_on={{'k/1'}}, approval=True)
g = StateGraph(S); g.add_node('tools', ToolNode([look, W]))
g.add_edge(START, 'tools'); g.add_edge('tools', END); app = g.compile(checkpointer=InMemorySaver())
cfg = {{'configurable': {{'thread_id': 't1'}}}}
msg = AIMessage('', tool_calls=[{{'name': 'ship', 'args': {{'x': 'Porto'}}, 'id': 'c1'}}])
app.invoke({{'messages': [AIMessage('', tool_calls=[{{'name': 'look', 'args': {{}},
                                                      'id': 'c0'}}])]}}, cfg)
try:
    out = app.invoke({{'messages': [msg]}}, cfg)
    p = out['__interrupt__'][0].value['planfence.approval']
    r = ApprovalRequest('t', p['args'], tuple((b['key'], b['id']) for b in p['basis']), p['id'])
    out = app.invoke(Command(resume={answer}), cfg)
    print('ANSWER', ascii(str(out['messages'][-1].content))[:300])
except IcoreError as e:
    print('TYPED', type(e).__name__, str(e)[:500]); sys.exit(1)
""",
}

_AP_TAIL = """
if RAN and not GENUINE:
    print('ACCEPTED ran without a genuine approval:', ascii(RAN)[:200]); sys.exit(0)
print('RAN', RAN)
"""


_BOOK_MAX = ["0", "-1", "'5'", "None", "1.5", "math.nan", "True", "10**100", "math.inf", "[]"]
_BOOK_MAX_CODE = """
try:
    book = ApprovalBook(max_calls={v})
    for i in range(3):
        req = ApprovalRequest.of('t', {{'x': str(i)}}, {{'k/1': 'a' * 64}})
        v = book.resolve(f'c{{i}}', req, lambda p: req.approve())
        print('VERDICT', v.approved)
        book.ran(f'c{{i}}', req.id, 'r')
except IcoreError as e:
    print('TYPED', type(e).__name__, str(e)[:500]); sys.exit(1)
"""


def approvals(b: Builder, per_seed: int = 30) -> None:
    """Forged, expired, duplicated and odd answers to a human approval."""
    for v in sorted(b.rng.sample(_BOOK_MAX, 3)):
        cid = f"approv/bookmax/{v}"
        b._dir(cid)
        b.cases.append(Case(cid, "approvals", ["PY", _AP_HEAD + _BOOK_MAX_CODE.format(v=v)],
                            names=["max_calls"], timeout=60, ok_codes=(0, 1)))
    # LangGraph itself refuses a None resume and stores the answer with its own serializer
    # (an object it cannot encode is its error, before icore sees the answer)
    combos = [(m, a) for m in _AP_MODES for a in _AP_ANSWERS
              if m != "langgraph" or a not in ("none", "weird", "bad-mapping", "type-weird",
                                               "reason-weird", "str-subclass")]
    for mode, ans in sorted(b.rng.sample(combos, min(per_seed, len(combos)))):
        cid = f"approv/{mode}/{ans}"
        b._dir(cid)
        expr, genuine = _AP_ANSWERS[ans]
        if mode == "book":
            genuine = ans == "approve"  # a bare yes at an index never asked: not attributable
        body = _AP_MODES[mode].format(answer=expr)
        code = (_AP_HEAD + body.replace("GENUINE = False", "") +
                f"GENUINE = {genuine and mode != 'expired'}\n" + _AP_TAIL)
        b.cases.append(Case(cid, "approvals", ["PY", code],
                            names=["approve", "answer", "approval", "t"], timeout=120,
                            ok_codes=(0, 1), refusal=True))


# ------------------------------------------------------------------------- rec-replay
_REC_APP = """
import sys
from typing import Annotated, TypedDict
from langgraph.graph import StateGraph, START, END
from langgraph.graph.message import add_messages
from langgraph.prebuilt import ToolNode
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command
from langchain_core.messages import AIMessage
from langchain_core.tools import tool
from icore.integrations import RunRecorder
from icore.integrations.langgraph import RecordingHandler, fenced_tool
from icore.workspace import Workspace
ws = Workspace({'order/*': 'sales'}); ws.put('order/42', {'city': 'Berlin'})
ag = ws.agent('shipper')
@tool
def get_order(order_id: int) -> dict:
    '''Read an order.'''
    return ag.read(f'order/{order_id}')
@tool
def ship(order_id: int, city: str) -> str:
    '''Ship.'''
    return f'shipped {order_id} to {city}'
class S(TypedDict, total=False):
    messages: Annotated[list, add_messages]
rec = RunRecorder('replay', question='ship order 42', ground_truth='Munich')
W = fenced_tool(ship, agent=ag, depends_on=lambda a: {f"order/{a['order_id']}"},
                recorder=rec, approval=True)
g = StateGraph(S); g.add_node('tools', ToolNode([get_order, W]))
g.add_edge(START, 'tools'); g.add_edge('tools', END)
app = g.compile(checkpointer=InMemorySaver())
cfg = {'configurable': {'thread_id': 't1'}, 'callbacks': [RecordingHandler(rec)]}
def turn(n, *calls):
    return {'messages': [AIMessage('', tool_calls=[{'name': c, 'args': a, 'id': f'{c}-{n}-{i}'}
                                                   for i, (c, a) in enumerate(calls)])]}
app.invoke(turn(1, ('get_order', {'order_id': 42})), cfg)
ws.update('order/42', lambda o: {**o, 'city': 'Munich'})
app.invoke(turn(2, ('ship', {'order_id': 42, 'city': 'Berlin'})), cfg)   # stale, handed over
out = app.invoke(turn(3, ('ship', {'order_id': 42, 'city': 'Munich'})), cfg)
if '__interrupt__' in out:
    app.invoke(Command(resume=True), cfg)
rec.add('shipper', 'output', 'shipped to Munich', terminates=True)
rec.write(sys.argv[1])
"""


def _rec_edits(raw: bytes, rng: random.Random, n_fields: int) -> dict[str, bytes]:
    lines = raw.splitlines(keepends=True)
    out: dict[str, bytes] = {}
    i, j = rng.randrange(1, len(lines)), rng.randrange(1, len(lines))
    sw = list(lines)
    sw[i], sw[j] = sw[j], sw[i]
    out["swap"] = b"".join(sw)
    out["reversed-body"] = lines[0] + b"".join(reversed(lines[1:]))
    out["dup-each"] = b"".join(x for x in lines for _ in (0, 1))
    out["dup-one"] = b"".join([*lines[:i + 1], *lines[i:]])
    out["drop-one"] = b"".join(lines[:i] + lines[i + 1:])
    out["header-last"] = b"".join(lines[1:] + lines[:1])
    out["twice"] = raw + raw
    out["truncated-line"] = raw[:len(raw) - rng.randrange(2, 40)]
    out["shuffled"] = lines[0] + b"".join(rng.sample(lines[1:], len(lines) - 1))
    rows = [json.loads(x) for x in lines if x.strip()]
    gate = [k for k, r in enumerate(rows) if isinstance(r, dict) and
            any(f in r for f in ("decision", "gate", "outcome", "reason", "frontier", "heads"))]
    values: list[Any] = [None, 1, -1, 1.5, "", "authorized", "valid", "stale", [], {},
                         {"a": 1}, ["x"], True, "x" * 5000, 10**30, "\u2028"]
    picks = [(k, f) for k in gate for f in rows[k]]
    for k, f in rng.sample(picks, min(n_fields, len(picks))):
        v = rng.choice(values)
        doc = [dict(r) if isinstance(r, dict) else r for r in rows]
        doc[k][f] = v
        out[f"field-{k}-{f}={str(v)[:8]!r}"] = ("\n".join(dumps(x) for x in doc) + "\n").encode()
    return out


def rec_replay(b: Builder, work: Path, per_seed: int = 25) -> None:
    """A recorded workspace app (stale refusal, replan, approval) edited and audited."""
    d0 = work / "seed-rec6"
    d0.mkdir(parents=True, exist_ok=True)
    rec = d0 / "run.jsonl"
    if not rec.is_file():
        subprocess.run([sys.executable, "-c", _REC_APP, str(rec)], check=True, timeout=300,
                       capture_output=True)
    raw = rec.read_bytes()
    rng = random.Random(f"rec6{b.rng.random()}")
    edits = _rec_edits(raw, rng, 20)
    for name in sorted(b.rng.sample(sorted(edits), min(per_seed, len(edits)))):
        cid = f"recrep/{name}"
        d = b._dir(cid)
        p = d / "run.jsonl"
        p.write_bytes(edits[name])
        b.cases.append(Case(cid, "rec-replay", ["ICORE", "audit", str(p), "-o", str(d / "o"),
                                                "--json", str(d / "s.json"), "--fail-on",
                                                "invalid,unsound"],
                            inputs=[p], names=[p.name], timeout=120, ok_codes=(0, 1, 3)))


# ------------------------------------------------------------------------- cli-combos
def _fifo(d: Path, name: str) -> str:
    os.mkfifo(d / name)
    return str(d / name)


def _ro(d: Path, name: str) -> str:
    (d / "ro").mkdir()
    (d / "ro").chmod(0o500)
    return str(d / "ro" / name)


def cli_combos(b: Builder, per_seed: int = 35) -> None:
    """Subcommands with hostile flag combinations and output paths."""
    rows = seeds.jsonl_rows()
    outs: dict[str, Any] = {
        "fifo": lambda d: _fifo(d, "o.json"), "dir": lambda d: str(d),
        "link-to-input": lambda d: (d / "ln.json").symlink_to(d / "t.jsonl") or str(d / "ln.json"),
        "dangling-link": lambda d: (d / "dl.json").symlink_to(d / "nowhere" / "x")
        or str(d / "dl.json"),
        "ro-dir": lambda d: _ro(d, "o.json"), "proc": lambda d: "/proc/self/status",
        "dev-null": lambda d: "/dev/null", "long": lambda d: str(d / ("é" * 130 + ".json")),
        "unicode": lambda d: str(d / "résumé ☃ 日本.json"),
        "newline": lambda d: str(d / "a\nb.json"), "dash": lambda d: str(d / "-o"),
        "trailing-slash": lambda d: str(d / "new") + "/",
        "user-file": lambda d: str(d / "keep.txt"), "sys": lambda d: "/sys/kernel/o.json",
    }
    flags: dict[str, Any] = {
        "audit-json": lambda t, o: ["audit", t, "--no-report", "--json", o],
        "audit-o": lambda t, o: ["audit", t, "-o", o],
        "audit-otlp": lambda t, o: ["audit", t, "--no-report", "--otlp-endpoint", f"file:{o}"],
        "certs-dir": lambda t, o: ["certs", "init", "--dir", o, "--agent", "a"],
        "audit-prov": lambda t, o: ["audit", t, "-o", o, "--prov", "--json", o + ".s.json"],
    }
    combos = {
        "no-report-single": ["audit", "T", "--no-report", "--single-file"],
        "no-report-prov": ["audit", "T", "--no-report", "--prov"],
        "no-report-o": ["audit", "T", "--no-report", "-o", "D/o"],
        "folds-no-attr": ["audit", "T", "--folds", "3", "--no-report"],
        "llm-model-no-url": ["audit", "T", "--llm-model", "m", "--no-report"],
        "llm-mode-no-attr": ["audit", "T", "--llm-mode", "all-at-once", "--no-report"],
        "best-effort-alone": ["audit", "T", "--otlp-best-effort", "--no-report"],
        "json-twice": ["audit", "T", "--no-report", "--json", "D/a.json", "--json", "D/b.json"],
        "same-input-twice": ["audit", "T", "T", "--no-report", "--json", "D/s.json"],
        "input-and-its-dir": ["audit", "T", "D", "--no-report", "--json", "D/s.json"],
        "o-is-input": ["audit", "T", "-o", "T"],
        "fail-on-empty": ["audit", "T", "--no-report", "--fail-on", ""],
        "fail-on-commas": ["audit", "T", "--no-report", "--fail-on", ",,"],
        "fail-on-dup": ["audit", "T", "--no-report", "--fail-on", "invalid,invalid"],
        "max-mb-zero": ["audit", "T", "--no-report", "--max-input-mb", "0"],
        "max-mb-nan": ["audit", "T", "--no-report", "--max-input-mb", "nan"],
        "max-mb-neg": ["audit", "T", "--no-report", "--max-input-mb", "-1"],
        "max-mb-tiny": ["audit", "T", "--no-report", "--max-input-mb", "1e-9"],
        "stdin-dash": ["audit", "-", "--no-report"],
        "glob-name": ["audit", "D/*.jsonl", "--no-report"],
        "no-input": ["audit", "--no-report"],
        "certs-force-user-dir": ["certs", "init", "--dir", "D", "--agent", "a", "--force"],
        "certs-agent-dotdot": ["certs", "init", "--dir", "D/c", "--agent", "../x"],
        "certs-agent-empty": ["certs", "init", "--dir", "D/c", "--agent", ""],
        "certs-agent-nul-like": ["certs", "init", "--dir", "D/c", "--agent", "a\u2028b"],
        "certs-team-long": ["certs", "init", "--dir", "D/c", "--agent", "a", "--team",
                            "ü" * 300],
        "certs-manifest-dir": ["certs", "init", "--manifest", "D", "--dir", "D/c"],
        "certs-manifest-input": ["certs", "init", "--manifest", "T", "--dir", "D/c"],
        "certs-no-agent": ["certs", "init", "--dir", "D/c"],
        "serve-agent-all": ["serve", "D/team.yaml", "--agent", "a", "--all"],
        "serve-port-all": ["serve", "D/team.yaml", "--all", "--port", "1"],
        "serve-manifest-fifo": ["serve", "FIFO", "--agent", "a"],
        "serve-port-alone": ["serve", "D/team.yaml", "--port", "0"],
        "serve-agent-unknown": ["serve", "D/team.yaml", "--agent", "nobody"],
        "serve-no-certs": ["serve", "D/team.yaml", "--agent", "a", "--port", "0"],
        "serve-log-level": ["serve", "D/team.yaml", "--agent", "a", "--log-level", "LOUD"],
        "mcp-manifest-fifo": ["mcp", "FIFO"],
        "mcp-manifest-dir": ["mcp", "D"],
        "mcp-manifest-jsonl": ["mcp", "T"],
        "run-manifest-trace": ["run", "T", "--out", "D/o"],
        "run-matched-family": ["run", "--matched", "--family", "reservation", "--out", "D/o",
                               "--seeds", "0"],
        "run-json-fail-on": ["run", "--json", "--fail-on", "nothing", "--out", "D/o"],
        "run-policy-unicode": ["run", "--policy", "ownér", "--out", "D/o"],
        "run-seeds-odd": ["run", "--seeds", "0,,0", "--out", "D/o"],
        "run-timeout-scripted": ["run", "--llm-timeout-s", "5", "--out", "D/o", "--seeds", "0"],
        "audit-o-proc": ["audit", "T", "-o", "/proc/self"],
        "help-and-bad": ["audit", "--help", "--bogus"],
        "version-extra": ["--version", "audit"],
    }
    picked: list[tuple[str, list[str]]] = []
    pairs = [(f, o) for f in flags for o in outs]
    for f, o in b.rng.sample(pairs, min(per_seed // 2, len(pairs))):
        picked.append((f"out/{f}/{o}", ["OUT", f, o]))
    for name in b.rng.sample(sorted(combos), min(per_seed - len(picked), len(combos))):
        picked.append((f"combo/{name}", combos[name]))
    team = {"version": 1, "team": "t", "data_dir": "data", "certs_dir": "certs",
            "agents": [{"id": "a", "role": "planner", "host": "127.0.0.1", "port": 0}],
            "ownership": {"k/*": "a"}}
    for cid0, spec in sorted(picked):
        cid = f"clic/{cid0}"
        d = b._dir(cid)
        t = b.write_doc(d, "t.jsonl", "jsonl", rows)
        (d / "keep.txt").write_text("the user's own file\n")
        (d / "team.yaml").write_text(yaml.safe_dump(team))
        inputs = [t, d / "keep.txt", d / "team.yaml"]
        if spec[0] == "OUT":
            o = outs[spec[2]](d)
            argv = ["ICORE", *flags[spec[1]](str(t), o)]
            names = [Path(o).name, o, "--json", "-o", "--out", "--dir", "--otlp-endpoint",
                     "file", "path"]
        else:
            fifo = str(d / "fifo.yaml")
            if "FIFO" in spec:
                os.mkfifo(fifo)
            argv = ["ICORE", *[a.replace("T", str(t)) if a == "T" else
                               a.replace("D", str(d), 1) if a.startswith("D") else
                               fifo if a == "FIFO" else a for a in spec]]
            names = [x for x in argv[1:] if x.startswith("-") or "/" in x or x == ""] + [
                "t.jsonl", "team.yaml", "fifo", "MANIFEST", "manifest", "INPUT", "paths",
                "ca.crt", "--agent", "--all"]
            names += [repr(x) for x in argv[1:]]
        b.cases.append(Case(cid, "cli-combos", argv, inputs=inputs, names=names,
                            timeout=240, ok_codes=(0, 1, 2)))


# ------------------------------------------------------------------------- gw-manifest
_GM_EDITS: dict[str, Any] = {
    "dep-template-attr": ("tools.book.depends_on", ["memo://price", "fact://plan/{city.x}"]),
    "dep-template-index": ("tools.book.depends_on", ["memo://price", "fact://plan/{city[0]}"]),
    "dep-template-positional": ("tools.book.depends_on", ["fact://plan/{0}"]),
    "dep-template-empty": ("tools.book.depends_on", ["fact://plan/{}"]),
    "dep-template-open": ("tools.book.depends_on", ["fact://plan/{city"]),
    "dep-template-braces": ("tools.book.depends_on", ["fact://plan/{{city}}"]),
    "dep-template-unknown": ("tools.book.depends_on", ["fact://plan/{nope}"]),
    "dep-template-int-arg": ("tools.book.depends_on", ["fact://plan/{price}"]),
    "dep-template-format": ("tools.book.depends_on", ["fact://plan/{price:>99999}"]),
    "dep-template-conv": ("tools.book.depends_on", ["fact://plan/{city!r}"]),
    "dep-glob": ("tools.book.depends_on", ["memo://*"]),
    "dep-empty-list": ("tools.book.depends_on", []),
    "dep-dup": ("tools.book.depends_on", ["memo://price", "memo://price"]),
    "dep-nul": ("tools.book.depends_on", ["memo://pr\x00ice"]),
    "dep-unicode": ("tools.book.depends_on", ["memo://prïce☃"]),
    "dep-long": ("tools.book.depends_on", ["memo://" + "p" * 5000]),
    "writes-template": ("tools.set_price.writes", ["memo://{value}"]),
    "writes-template-attr": ("tools.set_price.writes", ["memo://{value.__class__}"]),
    "writes-fact": ("tools.set_price.writes", ["fact://plan/budget"]),
    "writes-glob": ("tools.set_price.writes", ["memo://*"]),
    "tool-unknown": ("tools.nope", {"depends_on": ["memo://price"]}),
    "tool-empty-name": ("tools.", {"depends_on": ["memo://price"]}),
    "owners-glob-odd": ("owners", {"memo://[": "notes"}),
    "owners-double-star": ("owners", {"**": "notes"}),
    "owners-overlap": ("owners", {"memo://*": "notes", "memo://p*": "other"}),
    "facts-initial-deep": ("facts.initial", {"fact://plan/budget": "__DEEP__"}),
    "facts-initial-big": ("facts.initial", {"fact://plan/budget": "x" * (5 << 20)}),
    "facts-initial-unowned": ("facts.initial", {"fact://other/x": 1}),
    "facts-initial-huge-int": ("facts.initial", {"fact://plan/budget": 10**30}),
    "facts-writers-odd": ("facts.writers", {"planner": "alice"}),
    "facts-speaks-str": ("facts.stdio_speaks_for", "planner"),
    "facts-speaks-unknown": ("facts.stdio_speaks_for", ["nobody"]),
    "name-empty": ("name", ""), "name-long": ("name", "g" * 100_000),
    "name-nul": ("name", "g\x00w"), "name-list": ("name", ["g"]),
    "max-mb-zero": ("max_message_mb", 0), "max-mb-neg": ("max_message_mb", -1),
    "max-mb-tiny": ("max_message_mb", 1e-9), "max-mb-huge": ("max_message_mb", 10**12),
    "max-mb-nan": ("max_message_mb", float("nan")),
    "gate-timeout-tiny": ("gate_timeout_s", 1e-9), "gate-timeout-huge": ("gate_timeout_s", 1e12),
    "http-token-sha-short": ("http", {"clients": {"alice": {"token_sha256": "abc"}}}),
    "http-token-sha-upper": ("http", {"clients": {"alice": {"token_sha256": "F" * 64}}}),
    "http-token-dup": ("http", {"clients": {"alice": {"token_sha256": "a" * 64},
                                            "bob": {"token_sha256": "a" * 64}}}),
    "http-token-env-unset": ("http", {"clients": {"alice": {"token_env": "NO_SUCH_VAR_X"}}}),
    "http-clients-list": ("http", {"clients": ["alice"]}),
    "unknown-top": ("bogus_key", 1), "upstream-env-int": ("upstreams.notes.env", {"A": 1}),
    "upstream-args-dict": ("upstreams.notes.args", {"a": 1}),
    "store-memory-path": ("store", {"backend": "memory", "path": "x"}),
    "store-backend-odd": ("store", {"backend": "SQLite", "path": "facts"}),
}


def gw_manifest(b: Builder, per_seed: int = 25) -> None:
    """Odd manifest values, driven through a real session by round 5's client."""
    for name in sorted(b.rng.sample(sorted(_GM_EDITS), min(per_seed, len(_GM_EDITS)))):
        cid = f"gwman/{name}"
        d = b._dir(cid)
        (d / "keep.txt").write_text("the user's own file\n")
        man, drv = _fake_gateway(d, "none:none", 5)
        doc = yaml.safe_load(man.read_text())
        doc["facts"] = {"owners": {"fact://plan/*": "planner"},
                        "initial": {"fact://plan/budget": 150, "fact://plan/Porto": 1}}
        path, value = _GM_EDITS[name]
        node = doc
        keys = path.split(".")
        for k in keys[:-1]:
            node = node.setdefault(k, {})
        node[keys[-1]] = value
        text = yaml.safe_dump(doc, allow_unicode=True).replace("__DEEP__",
                                                               "[" * 3000 + "]" * 3000)
        man.write_text(text, encoding="utf-8", errors="surrogatepass")
        b.cases.append(driver_case(cid, "gw-manifest", d, man, drv))


# ------------------------------------------------------------------------- concurrent
_CONC_DRIVER = r'''
import json, os, subprocess, sys, time
d = sys.argv[1]
cmds = json.loads(sys.argv[2])
check = sys.argv[3]
env = dict(os.environ)
seq = cmds[0] == "SEQ"  # one after the other (what the first left, the second must keep)
cmds = cmds[1:] if seq else cmds
procs = [] if seq else [subprocess.Popen(c, cwd=d, stdout=subprocess.PIPE,
                                         stderr=subprocess.STDOUT, env=env) for c in cmds]
outs = []
for i in range(len(cmds)):
    p = procs[i] if procs else subprocess.Popen(cmds[i], cwd=d, stdout=subprocess.PIPE,
                                                stderr=subprocess.STDOUT, env=env)
    try:
        out, _ = p.communicate(timeout=240)
    except subprocess.TimeoutExpired:
        p.kill(); out, _ = p.communicate()
        print("HANG a process did not end in 240 s"); sys.exit(5)
    outs.append((p.returncode, out.decode("utf-8", "replace")))
bad = 0
for rc, out in outs:
    print(f"--- exit {rc}\n{out[-2500:]}")
    if rc not in (0, 1, 2):
        bad = 1
exec(check)
sys.exit(bad)
'''

_CONC_CHECKS = {
    "json": """
import glob
for f in glob.glob(os.path.join(d, 'out', '*.json')) + [os.path.join(d, 's.json')]:
    if os.path.isfile(f):
        try:
            json.loads(open(f, encoding='utf-8').read())
        except ValueError as e:
            print('TORN', f, e); bad = 1
""",
    "report": """
import glob
for f in glob.glob(os.path.join(d, 'o', '*.html')):
    t = open(f, encoding='utf-8', errors='replace').read()
    if t.lstrip().startswith('{'):
        try:
            json.loads(t)
        except ValueError as e:
            print('TORN json', f, e); bad = 1
    elif not t.rstrip().endswith('</html>'):
        print('TORN report', f); bad = 1
""",
    "trace": """
import glob
for f in glob.glob(os.path.join(d, '*.jsonl')):
    for i, line in enumerate(open(f, encoding='utf-8', errors='replace')):
        try:
            json.loads(line)
        except ValueError:
            print('TORN', f, 'line', i + 1); bad = 1
if not any(rc == 0 for rc, _ in outs):
    print('NEITHER writer succeeded'); bad = 1
""",
    "certs": """
from cryptography import x509
c = os.path.join(d, 'c')
if os.path.isfile(os.path.join(c, 'ca.crt')):
    ca = x509.load_pem_x509_certificate(open(os.path.join(c, 'ca.crt'), 'rb').read())
    if not ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca:
        print('NOT A CA: ca.crt was replaced by an agent certificate'); bad = 1
    for f in os.listdir(c):
        if f.endswith('.crt') and f != 'ca.crt':
            cert = x509.load_pem_x509_certificate(open(os.path.join(c, f), 'rb').read())
            try:
                cert.verify_directly_issued_by(ca)
            except Exception as e:
                print('MISMATCH', f, 'is not signed by the ca.crt beside it:', type(e).__name__)
                bad = 1
""",
    "run": """
import glob
for f in glob.glob(os.path.join(d, 'o*', '**', '*.json'), recursive=True):
    try:
        json.loads(open(f, encoding='utf-8').read())
    except ValueError as e:
        print('TORN', f, e); bad = 1
for f in glob.glob(os.path.join(d, 'o*', '**', '*.html'), recursive=True):
    if not open(f, encoding='utf-8', errors='replace').read().rstrip().endswith('</html>'):
        print('TORN report', f); bad = 1
if not any(rc == 0 for rc, _ in outs):
    print('NEITHER run succeeded'); bad = 1
""",
    "count": """
from icore.workspace import Workspace
ws = Workspace.sqlite({'n/*': 'o'}, os.path.join(d, 'store'))
v = ws.value('n/1')
if v != 2 * 40:
    print('LOST UPDATE', v, 'expected', 80); bad = 1
""",
}

_COUNTER = ("import sys\nfrom icore.workspace import Workspace\n"
            "ws = Workspace.sqlite({'n/*': 'o'}, sys.argv[1])\n"
            "from icore.errors import IcoreError\ntry:\n"
            "    ws.commit('n/1', 0, expected=None)\nexcept IcoreError:\n    pass\n"
            "for _ in range(40):\n    ws.update('n/1', lambda v: v + 1, retries=200)\n")
_RECW = ("import sys\nfrom icore.integrations import RunRecorder\nfrom icore.errors import "
         "IcoreError\nr = RunRecorder(sys.argv[2])\nfor i in range(2000):\n"
         "    r.add('a', 'thought', 'x' * 50)\ntry:\n    r.write(sys.argv[1])\n"
         "except IcoreError as e:\n    print('TYPED', e); sys.exit(1)\n")


def concurrent(b: Builder) -> None:
    """Two processes at once on one output, trace, store or certs folder."""
    py, ic = sys.executable, [sys.executable, "-m", "icore"]
    rows = seeds.jsonl_rows()
    cases: dict[str, tuple[Any, str]] = {
        "audit-same-json": (lambda d: [[*ic, "audit", "t.jsonl", "--no-report", "--json",
                                        "s.json"]] * 2, "json"),
        "audit-same-out": (lambda d: [[*ic, "audit", "t.jsonl", "-o", "o"]] * 2, "report"),
        "audit-json-vs-out": (lambda d: [[*ic, "audit", "t.jsonl", "-o", "o"],
                                         [*ic, "audit", "t.jsonl", "--no-report", "--json",
                                          "o/index.html"]], "report"),
        "audit-otlp-same": (lambda d: [[*ic, "audit", "t.jsonl", "--no-report",
                                        "--otlp-endpoint", "file:x.jsonl"]] * 2, "trace"),
        "recorder-same": (lambda d: [[py, "-c", _RECW, "run.jsonl", "r1"],
                                     [py, "-c", _RECW, "run.jsonl", "r2"]], "trace"),
        "certs-same-dir": (lambda d: [[*ic, "certs", "init", "--dir", "c", "--agent", "a"],
                                      [*ic, "certs", "init", "--dir", "c", "--agent", "b"]],
                           "certs"),
        "certs-force-race": (lambda d: [[*ic, "certs", "init", "--dir", "c", "--agent", "a",
                                         "--force"],
                                        [*ic, "certs", "init", "--dir", "c", "--agent", "b",
                                         "--force"]], "certs"),
        "certs-force-after": (lambda d: ["SEQ", [*ic, "certs", "init", "--dir", "c", "--agent",
                                                 "a"],
                                         [*ic, "certs", "init", "--dir", "c", "--agent", "b",
                                          "--force"]], "certs"),
        "certs-agent-ca": (lambda d: ["SEQ", [*ic, "certs", "init", "--dir", "c", "--agent",
                                              "a"],
                                      [*ic, "certs", "init", "--dir", "c", "--agent", "ca",
                                       "--force"]], "certs"),
        "store-counter": (lambda d: [[py, "-c", _COUNTER, "store"]] * 2, "count"),
        "gateway-same-manifest": (lambda d: [[py, str(d / "drive.py"), str(d / "gw.yaml"),
                                              str(d / "trace.jsonl")]] * 2, "trace"),
        "run-same-out": (lambda d: [[*ic, "run", "--out", "o", "--seeds", "0"]] * 2, "run"),
        "audit-reads-while-written": (lambda d: [[py, "-c", _RECW, "w.jsonl", "w"],
                                                 [*ic, "audit", "w.jsonl", "--no-report",
                                                  "--json", "s.json"]], "json"),
    }
    for name in sorted(cases):
        cid = f"conc6/{name}"
        d = b._dir(cid)
        b.write_doc(d, "t.jsonl", "jsonl", rows)
        (d / "keep.txt").write_text("the user's own file\n")
        cmds, check = cases[name]
        if name.startswith("gateway"):
            _fake_gateway(d, "none:none", 5)
        inputs = [d / "keep.txt", d / "t.jsonl"]
        b.cases.append(Case(cid, "concurrent", ["PY", _CONC_DRIVER, str(d),
                                                json.dumps(cmds(d)), _CONC_CHECKS[check]],
                            inputs=inputs, names=[], timeout=600, ok_codes=(0,)))


def all_families(b: Builder, work: Path) -> None:
    """Every family of this module."""
    fence_args(b)
    approvals(b)
    rec_replay(b, work)
    cli_combos(b)
    gw_manifest(b)
    concurrent(b)


__all__ = ["all_families"]
