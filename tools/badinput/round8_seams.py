r"""Round 8's framework-seam family (issue 29): typed tools called with odd model JSON.

``seam-args``: a tool with typed parameters (``date``, ``datetime`` with a default, a
pydantic model, ``Enum``/``UUID``/``Decimal``, ``dict``/``list``, ``Literal``, a ``str``
holding JSON, ``Any``) wrapped by the LangGraph, Agents SDK, AG2 and CrewAI seams (CrewAI
in its own venv), recorded with :class:`RunRecorder`, and called through the framework's
own dispatch with the model's arguments as JSON text: each parameter given an impossible
date, a timestamp, ``NaN``, ``1e400``, 5000 digits, ``null``, a JSON string where an
object goes, a lone surrogate, 1 MB, or left out (its default). A fresh call may run or
be refused; a stale one (the fact changed after the read) must not run; the call must
end in an answer or a typed error, and the recording must be strict JSON and audit.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from .cases import Builder, Case

_REPO = Path(__file__).resolve().parents[2]
_CREW_PY = Path("/work/main/.venv-crewai/bin/python")

_HEAD = """
import sys, json, math, asyncio, datetime, decimal, uuid, enum, os, tempfile, traceback
import subprocess
from typing import Any, Literal, Optional
sys.path.insert(0, REPO)
from pydantic import BaseModel
from icore.errors import IcoreError
from icore.workspace import Workspace
from icore.integrations import RunRecorder
ws = Workspace({'k/*': 'o'}); ws.put('k/1', 1)
ag = ws.agent('a')
SEEN = []
class Addr(BaseModel):
    city: str
    zip: str = '00000'
class Speed(enum.Enum):
    FAST = 'fast'
    SLOW = 'slow'
def ours(exc):
    tb = traceback.extract_tb(exc.__traceback__)
    return bool(tb) and '/icore/' in tb[-1].filename
rec = RunRecorder('seam', question='q')
rec.task('q')
"""

_TOOLS: dict[str, tuple[str, dict[str, object]]] = {
    # name -> (the tool's code, a good call's arguments)
    "date": ("def T(on: datetime.date) -> str:\n    'Ship.'\n    SEEN.append(on)\n"
             "    return f'on {on}'\n", {"on": "2026-03-01"}),
    "datetime-default": ("def T(city: str, at: Optional[datetime.datetime] = None, "
                         "n: int = 1) -> str:\n    'Ship.'\n    SEEN.append((city, at, n))\n"
                         "    return 'ok'\n", {"city": "Porto", "at": "2026-03-01T10:00:00Z"}),
    "pydantic": ("def T(to: Addr, express: bool = False) -> str:\n    'Ship.'\n"
                 "    SEEN.append((to, express))\n    return 'ok'\n",
                 {"to": {"city": "Porto"}}),
    "enum-uuid-decimal": ("def T(speed: Speed, oid: uuid.UUID, fee: decimal.Decimal = "
                          "decimal.Decimal('1.5')) -> str:\n    'Ship.'\n"
                          "    SEEN.append((speed, oid, fee))\n    return 'ok'\n",
                          {"speed": "fast", "oid": "12345678-1234-5678-1234-567812345678"}),
    "dict-list": ("def T(meta: dict, tags: Optional[list[str]] = None) -> str:\n    'Ship.'\n"
                  "    SEEN.append((meta, tags))\n    return 'ok'\n",
                  {"meta": {"a": 1}, "tags": ["x"]}),
    "literal": ("def T(mode: Literal['a', 'b'] = 'a', n: float = 1.0) -> str:\n    'Ship.'\n"
                "    SEEN.append((mode, n))\n    return 'ok'\n", {"mode": "b", "n": 2.5}),
    "json-str": ("def T(payload: str) -> str:\n    'Ship.'\n    SEEN.append(payload)\n"
                 "    return 'ok'\n", {"payload": '{"a": 1}'}),
    "any": ("def T(x: Any = None) -> str:\n    'Ship.'\n    SEEN.append(x)\n    return 'ok'\n",
            {"x": 1}),
}

_VALUES: dict[str, str] = {
    # a parameter's value as JSON text the model sends
    "good": "", "missing": "DROP", "feb-30": '"2026-02-30"', "hour-25": '"2026-01-01T25:00:00"',
    "space-sep": '"2026-01-01 00:00"', "year-0": '"0000-01-01"', "timestamp": "1767225600",
    "tz-99": '"2026-01-01T00:00:00+99:00"', "nan": "NaN", "1e400": "1e400",
    "5000-digits": "9" * 5000, "null": "null", "json-string-object": '"{\\"city\\": \\"x\\"}"',
    "json-string-null": '"null"', "surrogate": '"\\ud800"', "1MB": '"__1MB__"',
    "empty-object": "{}", "list": "[1]", "bool": "true", "neg-zero": "-0.0",
    "extra-key": "EXTRA",
}

_FW: dict[str, str] = {
    "lg": """
from icore.integrations.langgraph import fenced_tool
from typing import Annotated, TypedDict
from langgraph.graph import StateGraph, START, END
from langgraph.graph.message import add_messages
from langgraph.prebuilt import ToolNode
from langchain_core.messages import AIMessage
class S(TypedDict, total=False):
    messages: Annotated[list, add_messages]
def dispatch(W):
    try:
        args = json.loads(TEXT)
    except (ValueError, RecursionError):
        print('MODEL-TEXT not a JSON object for LangGraph'); sys.exit(1)
    g = StateGraph(S); g.add_node('tools', ToolNode([W]))
    g.add_edge(START, 'tools'); g.add_edge('tools', END); app = g.compile()
    with ag.scope('c1'):
        out = app.invoke({'messages': [AIMessage('', tool_calls=[{'name': W.name,
            'args': args, 'id': 'c1'}])]}, {'configurable': {'thread_id': 'c1'}})
    return str(out['messages'][-1].content)
""",
    "oa": """
from icore.integrations.openai_agents import fenced_function_tool as fenced_tool
from agents.tool_context import ToolContext
def dispatch(W):
    async def go():
        with ag.scope('c1'):
            ctx = ToolContext(context=None, tool_name=W.name, tool_call_id='c1',
                              tool_arguments=TEXT)
            return await W.on_invoke_tool(ctx, TEXT)
    return str(asyncio.run(go()))
""",
    "ag2": """
from icore.integrations.ag2 import fenced_tool, record_agents
from ag2 import Agent
from ag2.events import ToolCallEvent, ToolResultEvent
from examples.ag2_app import ScriptedWorld
def dispatch(W):
    agent = Agent('a', config=ScriptedWorld(iter([ToolCallEvent('T', arguments=TEXT), 'ok'])),
                  tools=[W])
    record_agents(rec, agent)
    async def go():
        with ag.scope('c1'):
            reply = await agent.ask('go')
        return [str(e) for e in await reply.history.get_events()
                if isinstance(e, ToolResultEvent)]
    return str(asyncio.run(go()))
""",
    "crew": """
from icore.integrations.crewai import fenced_crewai_tool as fenced_tool
from crewai import Agent, Crew, Task
from tests.integrations.test_crewai_turns import scripted
def dispatch(W):
    a = Agent(role='r', goal='g', backstory='b', tools=[W], max_iter=3,
              llm=scripted([[{'id': 'call_1', 'type': 'function', 'function': {
                  'name': W.name, 'arguments': TEXT}}], 'done']))
    with ag.scope('c1'):
        out = Crew(agents=[a], tasks=[Task(description='d', expected_output='e',
                                           agent=a)]).kickoff()
    return str(out)
""",
}

_WRAP = {
    "lg": "from langchain_core.tools import tool as _t\nTOOL = _t(T)\n",
    "oa": "from agents import function_tool as _t\nTOOL = _t(T, strict_mode=False)\n",
    "ag2": "from ag2 import tool as _t\nTOOL = _t(T)\n",
    "crew": "from crewai.tools import tool as _t\nTOOL = _t('T')(T)\n",
}

_TAIL = """
with rec.active():
    try:
        W = fenced_tool(TOOL, agent=ag, depends_on={'k/1'})
    except IcoreError as e:
        print('TYPED', type(e).__name__, str(e)[:300]); sys.exit(1)
    with ag.scope('c1'):
        ag.read('k/1')
    if STALE:
        ws.put('k/1', 2)
    try:
        print('ANSWER', ascii(dispatch(W)[:300]))
    except IcoreError as e:
        print('TYPED', type(e).__name__, str(e)[:300])
    except Exception as e:
        if ours(e):
            raise
        print('FRAMEWORK-REFUSED', type(e).__name__, str(e)[:300])
if STALE and SEEN:
    print('ACCEPTED a stale call ran:', repr(SEEN)[:200]); sys.exit(0)
d = tempfile.mkdtemp(); p = os.path.join(d, 'run.jsonl')
rec.write(p)
for ln in open(p, 'rb').read().splitlines():
    try:
        json.loads(ln, parse_constant=lambda c: (_ for _ in ()).throw(ValueError(c)))
    except ValueError as e:
        print('STRICT the recording is no strict JSON:', e, ln[:160]); sys.exit(5)
a = subprocess.run([sys.executable, '-m', 'icore', 'audit', p, '--no-report'],
                   capture_output=True, text=True, errors='replace', timeout=240)
print('AUDIT', a.returncode, a.stdout[-600:], a.stderr[-1500:])
sys.exit(0 if a.returncode in (0, 3) else 6)
"""


def _text(good: dict[str, object], param: str, how: str) -> str:
    """The model's arguments text: ``good`` with ``param`` given ``how``."""
    if how == "good":
        return json.dumps(good)
    if how == "DROP" or _VALUES[how] == "DROP":
        return json.dumps({k: v for k, v in good.items() if k != param})
    if _VALUES[how] == "EXTRA":
        return json.dumps({**good, "zz_extra": 1})
    parts = [f"{json.dumps(k)}: {_VALUES[how] if k == param else json.dumps(v)}"
             for k, v in good.items()]
    if param not in good:
        parts.append(f"{json.dumps(param)}: {_VALUES[how]}")
    return "{" + ", ".join(parts) + "}"


def _params(code: str) -> list[str]:
    """The parameter names of ``def T(...)`` (a name, then ``:``, at top level)."""
    return re.findall(r"[(,] ?(\w+): ", code.split("\n", 1)[0])


def seam_args(b: Builder, per_seed: int = 24) -> None:
    """Typed tools x parameters x odd JSON values x frameworks, fresh and stale."""
    combos = [(fw, t, p, v, stale) for fw in _FW for t, (code, _) in _TOOLS.items()
              for p in _params(code) for v in _VALUES for stale in (False, True)
              if fw != "crew" or _CREW_PY.is_file()]
    for fw, t, p, v, stale in sorted(b.rng.sample(combos, min(per_seed, len(combos)))):
        code, good = _TOOLS[t]
        cid = f"seam8/{fw}/{t}/{p}={v}/{'stale' if stale else 'fresh'}"
        b._dir(cid)
        src = (f"REPO = {str(_REPO)!r}\n" + _HEAD + code + _WRAP[fw] + _FW[fw]
               + f"TEXT = {_text(good, p, v)!r}.replace('__1MB__', 'x' * (1 << 20))\n"
               + f"STALE = {stale}\n" + _TAIL)
        argv = ["PY", src] if fw != "crew" else [str(_CREW_PY), "-c", src]
        b.cases.append(Case(cid, "seam-args", argv, names=[], timeout=240, ok_codes=(0, 1),
                            refusal=True))


__all__ = ["seam_args"]
