r"""Bad inputs the first six rounds did not reach (issue 29, round 7).

Families, each generated from the sweep's seed (sampled where the product is large):

- ``sdk-state``: an OpenAI Agents SDK run paused for a human approval of a fenced tool,
  saved with ``RunState.to_json`` and edited as a file (an approval forged into it, the
  pending call's arguments or id changed, the SDK's invocation fingerprint dropped or
  recomputed, odd approval values), then resumed with ``RunState.from_json``, in the
  same process or as after a restart. A call may run only with arguments a human
  approved through the SDK (``state.approve``).
- ``truthy``: ``check=`` comparators and ``approve=`` answers returning truthy non-bools
  (``"no"``, ``1``, ``[0]``, ``0.5``, numpy-like objects, a ``bool`` subclass, objects
  whose ``__bool__`` raises), through ``Agent.execute``/``aexecute`` and the framework
  wrappers' ``approve=``: only a real yes approves.
- ``big-numbers``: integers past 2**53, 2**63, 2**64 and 4300 digits, ``-0.0``, NaN,
  infinities and subnormals in record content (memory and SQLite), tool arguments
  (their approval request ids) and recordings; the value read back must be the value
  written, equal requests must have equal ids, and the audit must read the recording.
- ``yaml-bombs``: run, team and gateway manifests with recursive aliases, alias and merge
  bombs, keys equal once resolved (``1``/``0x1``, ``true``/``yes``, ``~``/``null``),
  complex keys and nesting 1,000-100,000 deep: refused naming the file, in time.

The MCP family (``mcp-args``: ``\\u``-escaped and non-NFC arguments, big numbers) is in
:mod:`round7_mcp`; ``trace-graph`` (duplicate ids, parent cycles, mixed encodings) in
:mod:`round7_graph`.
"""

from __future__ import annotations

import copy
import random
from pathlib import Path

import yaml

from . import seeds
from .cases import Builder, Case

_REPO = Path(__file__).resolve().parents[2]

# ------------------------------------------------------------------------- sdk-state
_SDK_HEAD = """
import asyncio, json, os, sys, tempfile, traceback, hashlib
sys.path.insert(0, REPO)
from agents import Agent, Runner, RunState, function_tool
from agents.testing import assistant_message, function_call
from icore.errors import IcoreError
from icore.workspace import Workspace
from icore.integrations.openai_agents import fenced_function_tool
from tests.integrations.test_openai_agents_issue28 import _model, _outputs
DB = tempfile.mkdtemp()
ws = Workspace.sqlite({'load/*': 'planning'}, os.path.join(DB, 's'))
ws.put('load/L7', {'dock': 'D3'}, by='planning')
SENT, APPROVED = [], []
def build(ws):
    disp = ws.agent('dispatcher')
    @function_tool
    def get_load(load_id: str) -> str:
        '''Read a load.'''
        return json.dumps(disp.read(f'load/{load_id}'))
    def dispatch_truck(load_id: str, dock: str) -> str:
        '''Send a truck.'''
        SENT.append((load_id, dock)); return f'sent to {dock}'
    safe = fenced_function_tool(function_tool(dispatch_truck, needs_approval=True),
                                agent=disp, depends_on=lambda a: {f"load/{a['load_id']}"})
    return disp, Agent(name='dispatcher', tools=[get_load, safe], model=_model([
        [function_call('get_load', {'load_id': 'L7'}, call_id='c1')],
        [function_call('dispatch_truck', {'load_id': 'L7', 'dock': 'D3'}, call_id='c2')],
        [assistant_message('done')], [assistant_message('done')],
        [assistant_message('done')]]))
disp, agent = build(ws)
def args_to(s, old, new):  # every saved copy of the call's arguments edited
    def walk(x):
        if isinstance(x, dict):
            for k, v in x.items():
                if k == 'arguments' and isinstance(v, str) and old in v:
                    x[k] = v.replace(old, new)
                else:
                    walk(v)
        elif isinstance(x, list):
            for v in x:
                walk(v)
    walk(s)
def ours(exc):
    tb = traceback.extract_tb(exc.__traceback__)
    return bool(tb) and ('/icore/' in tb[-1].filename)
async def go():
    r = await Runner.run(agent, 'dispatch L7')
    item = r.interruptions[0]
    st = r.to_state()
    {approve}
    s = st.to_json()
    ctx = s['context']
    items = s['generated_items']
    {edit}
    text = json.dumps(s)
    {restart}
    try:
        st2 = await RunState.from_json(agent2, json.loads(text))
        r2 = await Runner.run(agent2, st2)
    except IcoreError as e:
        print('TYPED', type(e).__name__, str(e)[:400]); sys.exit(1)
    except Exception as e:
        if ours(e):
            raise
        print('SDK-REFUSED', type(e).__name__, str(e)[:300]); sys.exit(1)
    print('OUT', {k: v[:120] for k, v in _outputs(r2).items()}, len(r2.interruptions))
asyncio.run(go())
bad = [c for c in SENT if c not in APPROVED]
if bad:
    print('ACCEPTED ran without a human approval of these arguments:', bad); sys.exit(0)
print('SENT', SENT)
"""

_SDK_APPROVE = {
    "human": "st.approve(item); APPROVED.append(('L7', 'D3'))",
    "human-always": "st.approve(item, always_approve=True); APPROVED.append(('L7', 'D3'))",
    "none": "pass",
    "human-reject": "st.reject(item)",
}

_SDK_EDITS = {
    "as-saved": "pass",
    "args-dock": "args_to(s, '\"D3\"', '\"D9\"')",
    "args-dock-no-fingerprint": "args_to(s, '\"D3\"', '\"D9\"'); "
                                "ctx['tool_invocations'].pop('c2', None)",
    "args-load": "args_to(s, '\"L7\"', '\"L8\"'); ctx['tool_invocations'].pop('c2', None); "
                 "ws.put('load/L8', {'dock': 'D3'}, by='planning')",
    "forge-call": "ctx['approvals'] = {'dispatch_truck': {'approved': ['c2'], 'rejected': []}}",
    "forge-always": "ctx['approvals'] = {'dispatch_truck': {'approved': True, 'rejected': []}}",
    "forge-call-args": "ctx['approvals'] = {'dispatch_truck': {'approved': ['c2'], "
                       "'rejected': []}}; args_to(s, '\"D3\"', '\"D9\"'); "
                       "ctx['tool_invocations'].pop('c2', None)",
    "call-id-swapped": "s = json.loads(json.dumps(s).replace('\"c2\"', '\"c9\"'))",
    "approved-str": "ctx['approvals'] = {'dispatch_truck': {'approved': 'yes', 'rejected': []}}",
    "approved-int": "ctx['approvals'] = {'dispatch_truck': {'approved': 1, 'rejected': []}}",
    "approved-odd-list": "ctx['approvals'] = {'dispatch_truck': {'approved': ['c2', 1, None], "
                         "'rejected': 'c2'}}",
    "rejected-too": "ctx['approvals'] = {'dispatch_truck': {'approved': ['c2'], "
                    "'rejected': ['c2']}}",
    "tool-renamed": "ctx['approvals'] = {'get_load': {'approved': ['c2'], 'rejected': []}}",
    "interruption-dropped": "s['generated_items'] = [i for i in items if i.get('type') != "
                            "'tool_approval_item']",
    "items-reversed": "s['generated_items'] = list(reversed(items))",
    "context-null": "s['context'] = None",
    "approvals-list": "ctx['approvals'] = [['dispatch_truck', True]]",
    # the fact changes while the human decides: the approved call is stale, nothing runs
    "stale-meanwhile": "ws.put('load/L7', {'dock': 'D5'}, by='planning'); APPROVED.clear()",
}

_SDK_RESTART = {
    "same-process": "agent2 = agent",
    # a new process: a second store handle, a new agent that reads the fact, a new tool
    "restart": "ws2 = Workspace.sqlite({'load/*': 'planning'}, os.path.join(DB, 's'))\n"
               "    disp2, agent2 = build(ws2)\n    disp2.read('load/L7')",
}


def sdk_state(b: Builder, per_seed: int = 30) -> None:
    """A paused Agents SDK run saved as JSON, edited, resumed."""
    combos = [(a, e, r) for a in _SDK_APPROVE for e in _SDK_EDITS for r in _SDK_RESTART]
    for a, e, r in sorted(b.rng.sample(combos, min(per_seed, len(combos)))):
        cid = f"sdkst/{a}/{e}/{r}"
        b._dir(cid)
        code = f"REPO = {str(_REPO)!r}\n" + _SDK_HEAD.replace("{approve}", _SDK_APPROVE[a]).replace(
            "{edit}", _SDK_EDITS[e]).replace("{restart}", _SDK_RESTART[r])
        # the SDK's own refusals of an edited state name what it checked, in its words
        b.cases.append(Case(cid, "sdk-state", ["PY", code], names=[],
                            timeout=180, ok_codes=(0, 1), refusal=True))


# ------------------------------------------------------------------------- truthy
_TR_HEAD = """
import sys, asyncio
from icore.errors import IcoreError
from icore.workspace import Workspace
ws = Workspace({'k/*': 'o'}); ws.put('k/1', {'v': 1})
ag = ws.agent('a'); ag.read('k/1')
RAN = []
def T(x: str):
    RAN.append(x); return 'done'
class ArrayLike:  # numpy-like: truthy, == broadcasts, no real bool
    def __bool__(self):
        return True
    def __eq__(self, o):
        return ArrayLike()
    __hash__ = object.__hash__
class Ambiguous:
    def __bool__(self):
        raise ValueError('The truth value of an array with more than one element is ambiguous')
class TrueSub(int):
    pass
"""

_TR_VALUES: dict[str, tuple[str, bool]] = {
    # expression, whether it is a real yes
    "true": ("True", True), "no": ("'no'", False), "false-str": ("'False'", False),
    "one": ("1", False), "list-zero": ("[0]", False), "half": ("0.5", False),
    "dict": ("{'approved': False}", False), "array-like": ("ArrayLike()", False),
    "ambiguous": ("Ambiguous()", False), "int-sub": ("TrueSub(1)", False),
    "none": ("None", False), "empty": ("''", False), "object": ("object()", False),
    "yes-str": ("'yes'", False),
}

_TR_CALLS: dict[str, str] = {
    "check": "call = ag.execute('t', T, {{'x': 'p'}}, depends_on={{'k/1'}}, check=lambda r: V)",
    "check-async": "call = asyncio.run(ag.aexecute('t', T, {{'x': 'p'}}, depends_on={{'k/1'}}, "
                   "check=lambda r: V))",
    "check-with-human": "call = ag.execute('t', T, {{'x': 'p'}}, depends_on={{'k/1'}}, "
                        "approve=lambda r: r.approve(), check=lambda r: V)",
    "human": "call = ag.execute('t', T, {{'x': 'p'}}, depends_on={{'k/1'}}, approve=lambda r: V)",
}

_TR_TAIL = """
try:
{call}
except IcoreError as e:
    print('TYPED', type(e).__name__, str(e)[:400]); sys.exit(1)
print('CALL', call.executed)
if RAN and not {yes}:
    print('ACCEPTED a truthy non-bool approved the call:', {expr!r}); sys.exit(0)
"""


def truthy(b: Builder, per_seed: int = 30) -> None:
    """``check=`` / ``approve=`` answering with truthy values that are no real yes."""
    combos = [(c, v) for c in _TR_CALLS for v in _TR_VALUES]
    for c, v in sorted(b.rng.sample(combos, min(per_seed, len(combos)))):
        cid = f"truthy/{c}/{v}"
        b._dir(cid)
        expr, yes = _TR_VALUES[v]
        if c == "human":  # a human's answer: read_answer ('yes' too)
            yes = yes or v == "yes-str"
        call = _TR_CALLS[c].format().replace("V", expr)
        body = "\n".join("    " + x for x in call.splitlines())
        code = _TR_HEAD + _TR_TAIL.format(call=body, yes=yes, expr=expr)
        b.cases.append(Case(cid, "truthy", ["PY", code], names=["check", "approve", "t"],
                            timeout=120, ok_codes=(0, 1), refusal=True))


# ------------------------------------------------------------------------- big-numbers
_BN_VALUES: dict[str, str] = {
    "2^53+1": "2**53 + 1", "-2^53-1": "-(2**53) - 1", "2^63": "2**63", "2^64": "2**64",
    "-2^63-1": "-(2**63) - 1", "10^30": "10**30", "10^400": "10**400",
    "4299-digits": "int('9' * 4299)", "4301-digits": "int('9' * 4301)",
    "neg-zero": "-0.0", "nan": "math.nan", "inf": "math.inf", "-inf": "-math.inf",
    "subnormal": "5e-324", "max-float": "1.7976931348623157e308", "float-2^53": "2.0**53",
    "nested": "{'a': [2**64, -0.0, {'b': 10**30}]}", "bool-int": "[True, 1, 1.0]",
}

_BN_CODE = """
import sys, math, os, tempfile, json
sys.set_int_max_str_digits(0)
V = {value}
sys.set_int_max_str_digits(4300)
from icore.errors import IcoreError
from icore.workspace import Workspace, ApprovalRequest
from icore.integrations import RunRecorder
def same(a, b):
    return json.dumps(a, sort_keys=True, default=repr) == json.dumps(b, sort_keys=True,
                                                                       default=repr) if \\
        not isinstance(a, float) else (math.copysign(1, a) == math.copysign(1, b) and a == b)
def typed(what, f):
    try:
        return f()
    except IcoreError as e:
        print('TYPED', what, type(e).__name__, str(e)[:300]); return IcoreError
{body}
"""

_BN_BODIES: dict[str, str] = {
    "put-memory": """ws = Workspace({'k/*': 'o'})
if typed('put', lambda: ws.put('k/1', V)) is not IcoreError:
    got = ws.value('k/1')
    if not same(V, got) or type(V) is not type(got):
        print('ACCEPTED a value read back differs', repr(got)[:80]); sys.exit(0)""",
    "put-sqlite": """d = tempfile.mkdtemp()
ws = Workspace.sqlite({'k/*': 'o'}, os.path.join(d, 's'))
if typed('put', lambda: ws.put('k/1', V)) is not IcoreError:
    ws2 = Workspace.sqlite({'k/*': 'o'}, os.path.join(d, 's'))
    got = ws2.value('k/1')
    if not same(V, got) or type(V) is not type(got):
        print('ACCEPTED a value read back differs', repr(got)[:80]); sys.exit(0)""",
    "execute-args": """ws = Workspace({'k/*': 'o'}); ws.put('k/1', 1)
ag = ws.agent('a'); ag.read('k/1')
SEEN = []
def T(x):
    SEEN.append(x); return 'ok'
call = typed('execute', lambda: ag.execute('t', T, {'x': V}, depends_on={'k/1'}))
if call is not IcoreError:
    print('CALL', call.executed, call.reason)
    if call.executed and not same(V, SEEN[0]):
        print('ACCEPTED the tool saw another value', repr(SEEN[0])[:80]); sys.exit(0)""",
    "request-ids": """basis = {'k/1': 'a' * 64}
r1 = typed('of', lambda: ApprovalRequest.of('t', {'x': V}, basis))
try:  # the value as a JSON client would send it back (None: it has no JSON text)
    W = json.loads(json.dumps(V))
except ValueError:
    W = None
r2 = typed('of', lambda: ApprovalRequest.of('t', {'x': W}, basis))
if r1 is not IcoreError and r2 is not IcoreError and r1.id != r2.id and same(V, W):
    print('ACCEPTED equal arguments, two request ids'); sys.exit(0)
if isinstance(V, float) and V == 0.0 and r1 is not IcoreError:
    r0 = ApprovalRequest.of('t', {'x': 0.0}, basis)
    print('ZERO', r0.id == r1.id)""",
    "record-audit": """rec = RunRecorder('bn', question='q')
added = typed('add', lambda: rec.add('a', 'tool_output', 'out', tool='t', args={'x': V}))
if added is not IcoreError:
    d = tempfile.mkdtemp(); p = os.path.join(d, 'run.jsonl')
    if typed('write', lambda: rec.write(p)) is not IcoreError:
        import subprocess
        x = os.path.join(d, 'x.otlp.jsonl')
        a = subprocess.run([sys.executable, '-m', 'icore', 'audit', p, '--no-report',
                            '--otlp-endpoint', 'file:' + x], capture_output=True, text=True)
        print('AUDIT', a.returncode, a.stdout[-300:], a.stderr[-1500:])
        if a.returncode not in (0, 1) or 'Traceback' in a.stderr:
            print('AUDIT-FAILED'); sys.exit(7)
        if os.path.isfile(os.path.join(d, 'x.otlp.jsonl')):
            b = subprocess.run([sys.executable, '-m', 'icore', 'audit', x, '--no-report'],
                               capture_output=True, text=True)
            print('REAUDIT', b.returncode, b.stderr[-1500:])
            if b.returncode not in (0, 1) or 'Traceback' in b.stderr:
                sys.exit(7)""",
}


def big_numbers(b: Builder, per_seed: int = 30) -> None:
    """Integers past 2**53 / 2**64 / 4300 digits, -0.0, NaN and inf through the API."""
    combos = [(k, v) for k in _BN_BODIES for v in _BN_VALUES]
    for k, v in sorted(b.rng.sample(combos, min(per_seed, len(combos)))):
        cid = f"bignum/{k}/{v}"
        b._dir(cid)
        code = _BN_CODE.format(value=_BN_VALUES[v], body=_BN_BODIES[k])
        b.cases.append(Case(cid, "big-numbers", ["PY", code],
                            names=["value", "content", "args", "argument", "float", "digits"],
                            timeout=120, ok_codes=(0, 1), refusal=True))


# ------------------------------------------------------------------------- yaml-bombs
def _bombs(base: str) -> dict[str, str]:
    """Name -> manifest text: ``base`` (a valid manifest's YAML) with a bomb added."""
    laughs = "a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"a{i}: &a{i} [*a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}, "
        f"*a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}]\n" for i in range(1, 9))
    merges = "m0: &m0 {k0: 0}\n" + "".join(
        f"m{i}: &m{i}\n  <<: [*m{i - 1}, *m{i - 1}]\n  k{i}: {i}\n" for i in range(1, 40))
    return {
        "laughs": base + laughs,
        "laughs-under-key": base.replace("\n", "\n", 1) + "x_bomb:\n  " + laughs.replace(
            "\n", "\n  "),
        "merge-chain": base + merges,
        "recursive-seq": base + "loop: &l [*l]\n",
        "recursive-map": base + "loop: &l {self: *l}\n",
        "recursive-merge": base + "loop: &l {<<: *l, k: 1}\n",
        "recursive-in-field": _first_list_field(base, "&l [*l, *l]"),
        "laughs-in-field": _first_list_field(base, "[&b0 [x, x, x, x, x, x, x, x, x, x], " +
                                             ", ".join(f"&b{i} [" + ", ".join(
                                                 [f"*b{i - 1}"] * 10) + "]"
                                                 for i in range(1, 9)) + "]"),
        "deep-in-field": _first_list_field(base, "[" * 5000 + "]" * 5000),
        "recursive-map-in-field": _first_map_field(base, "&m {a: *m}"),
        "merge-two-same-key": _first_map_field(base, "{<<: [{K: V1}, {K: V2}]}"),
        "merge-own-overrides": _first_map_field(base, "{<<: {K: V1}, K: V2}"),
        "dup-quoted-plain": _first_map_field(base, '{K: V1, "K": V2}'),
        "dup-escaped": _first_map_field(base, '{K: V1, "ESC": V2}'),
        "dup-int-forms": base + "x_dup: {1: a, 0x1: b, +1: c}\n",
        "dup-bool-forms": base + "x_dup: {true: a, yes: b, on: c}\n",
        "dup-null-forms": base + "x_dup: {~: a, null: b, '': c}\n",
        "dup-float-forms": base + "x_dup: {1.0: a, 1e0: b, 0.1e1: c}\n",
        "dup-top-via-merge": "<<: {" + base.splitlines()[0] + "}\n" + base,
        "complex-key-seq": base + "? [a, b]\n: 1\n",
        "complex-key-map": base + "? {a: 1}\n: 1\n",
        "set-tag": base + "x_set: !!set {a, b, a}\n",
        "omap-dup": base + "x_omap: !!omap [a: 1, a: 2]\n",
        "pairs": base + "x_pairs: !!pairs [a: 1, a: 2]\n",
        "deep-flow-1000": base + "deep: " + "[" * 1000 + "]" * 1000 + "\n",
        "deep-flow-100000": base + "deep: " + "[" * 100_000 + "]" * 100_000 + "\n",
        "deep-flow-map": base + "deep: " + "{a: " * 5000 + "1" + "}" * 5000 + "\n",
        "deep-block-2000": base + "deep:\n" + "".join(" " * i + f"k{i}:\n"
                                                       for i in range(1, 2000)) + " " * 2000
        + "v\n",
        "deep-block-seq": base + "deep:\n" + "".join(" " * (2 * i) + "-\n"
                                                      for i in range(1, 1500)),
        "many-anchors": base + "".join(f"x{i}: &x{i} {i}\n" for i in range(20_000)),
        "alias-undefined": base + "x: *nowhere\n",
        "anchor-redefined": base + "x1: &a 1\nx2: &a 2\nx3: *a\n",
        "two-documents": base + "---\n" + base,
        "python-tag": base + "x: !!python/object/apply:os.system ['echo PWNED']\n",
        "long-anchor": base + "x: &" + "a" * 100_000 + " 1\ny: *" + "a" * 100_000 + "\n",
    }


def _first_list_field(base: str, bomb: str) -> str:
    """``base`` with its first block list value replaced by ``bomb``."""
    lines = base.splitlines()
    for i, ln in enumerate(lines):
        if ln.rstrip().endswith(":") and i + 1 < len(lines) and lines[i + 1].lstrip(
                ).startswith("- "):
            j = i + 1
            indent = len(lines[j]) - len(lines[j].lstrip())
            while j < len(lines) and (lines[j].startswith(" " * indent + "- ") or
                                      lines[j].startswith(" " * (indent + 2))):
                j += 1
            return "\n".join([*lines[:i], ln.rstrip() + " " + bomb, *lines[j:]]) + "\n"
    return base + "x: " + bomb + "\n"


def _first_map_field(base: str, flow: str) -> str:
    r"""``base`` with its first block mapping of str -> scalar replaced by ``flow``.

    ``K``/``V1``/``V2`` in ``flow`` become that mapping's first key and two of its
    values; ``ESC`` the first key with each character written as a ``\\u`` escape.
    """
    lines = base.splitlines()
    for i, ln in enumerate(lines):
        nxt = lines[i + 1] if i + 1 < len(lines) else ""
        ind = len(nxt) - len(nxt.lstrip())
        if not (ln.rstrip().endswith(":") and ind > len(ln) - len(ln.lstrip())
                and ": " in nxt and not nxt.lstrip().startswith("- ")):
            continue
        j, vals, simple = i + 1, [], True
        while j < len(lines) and lines[j].startswith(" " * ind):  # the whole block
            k, _, v = lines[j].strip().partition(": ")
            simple = simple and not lines[j][ind].isspace() and v != ""
            vals.append((k, v))
            j += 1
        if not vals or not simple:
            continue
        key, v1 = vals[0]
        v2 = vals[-1][1] if len(vals) > 1 else v1 + "x"
        bare = key.strip("'\"")
        esc = "".join(f"\\u{ord(c):04x}" for c in bare)
        text = (flow.replace("ESC", esc).replace("K", key).replace("V1", v1)
                .replace("V2", v2))
        return "\n".join([*lines[:i], ln.rstrip() + " " + text, *lines[j:]]) + "\n"
    return base + "x: " + flow + "\n"


_OWNERS = {"run": (("ownership",), "req/*", "reviser-1", "planner-1"),
           "team": (("ownership",), "req/*", "planner", "booker"),
           "gateway": (("facts", "owners"), "fact://plan/*", "planner", "booker")}
"""Per manifest kind: an owner map's field, a key and two valid owners of it."""
_OWNER_MAPS = {"merge-two-same-key": "{{<<: [{{'{k}': {v1}}}, {{'{k}': {v2}}}]}}",
               "merge-own-overrides": "{{<<: {{'{k}': {v1}}}, '{k}': {v2}}}",
               "dup-quoted-plain": "{{{k}: {v1}, '{k}': {v2}}}",
               "dup-escaped": "{{'{k}': {v1}, \"{esc}\": {v2}}}"}
"""Owner maps whose key is given twice (merged, quoted or escaped): only the merge of
the mapping's own key over a merged one is YAML's rule (accepted)."""


_YAML_RULE = ("merge-own-overrides", "dup-top-via-merge")
"""A mapping's own key over a merged one: YAML's rule, a valid manifest may run."""


def yaml_bombs(b: Builder, per_seed: int = 30) -> None:
    """Run, team and gateway manifests with bombs, equal keys and very deep nesting."""
    from .surfaces import _gateway_doc
    kinds = {
        "run": (seeds.RUN_MANIFEST, "run.yaml",
                lambda p, d: ["ICORE", "run", "--manifest", str(p), "--out", str(d / "o")]),
        "team": (seeds.TEAM_MANIFEST, "team.yaml",
                 lambda p, d: ["ICORE", "certs", "init", "--manifest", str(p), "--dir",
                               str(d / "c")]),
        "gateway": (_gateway_doc(), "gw.yaml",
                    lambda p, d: ["sh", "-c", f'exec "$ICORE_PY" -m icore mcp {p} </dev/null']),
    }
    combos = [(k, n) for k in kinds for n in _bombs("x: 1\n")]
    for kind, name in sorted(b.rng.sample(combos, min(per_seed, len(combos)))):
        doc, fname, argv = kinds[kind]
        cid = f"ybomb/{kind}/{name}"
        d = b._dir(cid)
        base = yaml.safe_dump(doc, sort_keys=False)
        p = d / fname
        text = _bombs(base)[name]
        if name in _OWNER_MAPS:  # an owner map whose two values are both valid
            field, key, v1, v2 = _OWNERS[kind]
            node = doc = copy.deepcopy(doc)
            for k in field[:-1]:
                node = node[k]
            node[field[-1]] = "__MAP__"
            esc = "".join(f"\\u{ord(c):04x}" for c in key)
            text = yaml.safe_dump(doc, sort_keys=False).replace("__MAP__", _OWNER_MAPS[name]
                                                                .format(k=key, v1=v1, v2=v2,
                                                                        esc=esc))
        p.write_text(text, encoding="utf-8")
        b.cases.append(Case(cid, "yaml-bombs", argv(p, d), inputs=[p],
                            names=[p.name, "line", "manifest"], timeout=120,
                            # a mapping's own key over a merged one is YAML's rule
                            ok_codes=(0, 1, 2) if name in _YAML_RULE else (1, 2)))


def all_families(b: Builder, work: Path) -> None:
    """Every family of this module and of :mod:`round7_mcp`."""
    from . import round7_graph, round7_mcp
    sdk_state(b)
    truthy(b)
    big_numbers(b)
    round7_graph.trace_graph(b)
    yaml_bombs(b)
    round7_mcp.mcp_args(b)
    _ = random, work


__all__ = ["all_families"]
