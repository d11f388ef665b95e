"""Wrong types at every argument of the public API's entry points (issue 29, third round).

The ``python-api`` family of :mod:`cli_cases` holds hand-written calls; this one takes a
table of entry points (the calls a user makes: Workspace and Agent, Fence and
``protected``, the framework wrappers, RunRecorder, the importers and exporters, the
manifest and declaration loaders, stores, records, certificates), each with arguments
that work, and replaces one argument at a time by a value from :data:`BAD` (None, bytes,
NaN, infinities, a huge int, a negative, a lone surrogate, a 100,000-character string,
a dict where a list goes and back, an object, a directory, a FIFO, ``/dev/null``). The
(entry point, argument, value) triples are sampled with the sweep's seed. A call that
raises anything but an ``IcoreError`` (an AttributeError from inside icore, an
``unhashable type``, a UnicodeEncodeError) or hangs is a defect; a typed refusal must
name the argument. Accepting the value is fine here (None is a JSON value to ``put``):
the hand-written ``python-api`` cases say which values must be refused.
"""

from __future__ import annotations

import os
import textwrap

from . import cli_cases
from .cases import Builder, Case

BAD: dict[str, str] = {
    "none": "None", "bytes": "b'x'", "nan": "float('nan')", "inf": "float('inf')",
    "ninf": "float('-inf')", "huge": "10**100", "neg": "-1", "zero": "0", "true": "True",
    "float": "1.5", "surrogate": "'k/\\ud800'", "nul": "'k/\\x00'", "empty": "''",
    "long": "'x' * 100_000", "dict": "{'a': {'b': 1}}", "list": "[['k/1']]",
    "set": "{1, 2}", "object": "object()", "dir": "DIR", "fifo": "FIFO", "devnull":
    "'/dev/null'", "str": "'k/1'", "tuple": "('k/1', 2)", "func": "(lambda *a, **k: 1)",
}
"""Python expressions of the bad values (``DIR``/``FIFO`` are set up by the case)."""

_SETUP = """
import os, tempfile, functools, math
DIR = tempfile.mkdtemp(prefix='api-')
FIFO = os.path.join(DIR, 'fifo'); os.mkfifo(FIFO)
def t(x: int) -> int:
    'Add.'
    return x
from icore.workspace import Workspace
ws = Workspace({'k/*': 'o'}); ws.put('k/1', 1)
ag = ws.agent('a'); ag.read('k/1')
"""

_FENCE = textwrap.dedent(cli_cases._FENCE) + "from icore.memory import SQLiteStore\n"
"""The python-api family's fence (a store, a plan, a protected ``book``) plus SQLite."""

_TRACE = """
from icore.adapters import parse_jsonl
JSONL = ('{"agent": "u", "kind": "task", "content": "q"}\\n'
         '{"agent": "a", "kind": "output", "content": "x"}\\n')
GOOD = os.path.join(DIR, 'good.jsonl')
open(GOOD, 'w').write(JSONL)
"""

# (id, setup, call template, {argument: good expression}); the template names each
# argument as {name}; positional arguments are written in the template itself.
TARGETS: list[tuple[str, str, str, dict[str, str]]] = [
    ("Workspace", "", "Workspace({facts}, timeout_s={timeout_s})",
     {"facts": "{'k/*': 'o'}", "timeout_s": "2.0"}),
    ("Workspace.sqlite", "", "Workspace.sqlite({facts}, {path})",
     {"facts": "{'k/*': 'o'}", "path": "DIR"}),
    ("ws.put", "", "ws.put({key}, {value}, by={by}, inputs={inputs})",
     {"key": "'k/2'", "value": "1", "by": "'o'", "inputs": "[]"}),
    ("ws.value", "", "ws.value({key})", {"key": "'k/1'"}),
    ("ws.head", "", "ws.head({key})", {"key": "'k/1'"}),
    ("ws.update", "", "ws.update({key}, {fn}, retries={retries})",
     {"key": "'k/1'", "fn": "(lambda v: 2)", "retries": "3"}),
    ("ws.commit", "", "ws.commit({key}, {value}, expected={expected}, type={type})",
     {"key": "'k/3'", "value": "1", "expected": "None", "type": "'fact'"}),
    ("ws.agent", "", "ws.agent({name})", {"name": "'b'"}),
    ("agent.read", "", "ag.read({key})", {"key": "'k/1'"}),
    ("agent.execute", "", "ag.execute({action}, {fn}, {args}, depends_on={depends_on}, "
     "replan={replan}, turn={turn}, approve={approve}, check={check})",
     {"action": "'book'", "fn": "t", "args": "{'x': 1}", "depends_on": "{'k/1'}",
      "replan": "None", "turn": "None", "approve": "None", "check": "None"}),
    ("agent.action_record", "", "ag.action_record({action}, {args}, {keys}, turn={turn})",
     {"action": "'book'", "args": "{'x': 1}", "keys": "['k/1']", "turn": "None"}),
    ("agent.request_for", "", "ag.request_for({action}, {args}, {keys})",
     {"action": "'book'", "args": "{'x': 1}", "keys": "['k/1']"}),
    ("agent.record", "", "ag.record({rid})", {"rid": "'0' * 64"}),
    ("agent.forget", "", "ag.forget({keys})", {"keys": "['k/1']"}),
    ("fence.execute", _FENCE, "f.execute({tool}, roots={roots}, args={args}, "
     "raise_on_block={raise_on_block})",
     {"tool": "book", "roots": "[plan.id]", "args": "{}", "raise_on_block": "False"}),
    ("protected", _FENCE, "protected(depends_on={depends_on}, name={name})({fn})",
     {"depends_on": "{'k'}", "name": "'b2'", "fn": "t"}),
    ("store.head", _FENCE, "s.head({key})", {"key": "'k'"}),
    ("store.get", _FENCE, "s.get({rid})", {"rid": "r.id"}),
    ("store.heads", _FENCE, "s.heads({keys})", {"keys": "['k']"}),
    ("store.commit", _FENCE, "s.commit({record}, writer={writer})",
     {"record": "Record.create(key='k', owner='o', seq=2, content=1, supersedes=r.id)",
      "writer": "'o'"}),
    ("sqlite.store", _FENCE, "SQLiteStore({path}, own, {agent}).head('k')",
     {"path": "os.path.join(DIR, 's.db')", "agent": "'o'"}),
    ("OwnershipMap", _FENCE, "OwnershipMap({exact}, {patterns})",
     {"exact": "{'k': 'o'}", "patterns": "{'p/*': 'o'}"}),
    ("Record.create", _FENCE, "Record.create(key={key}, owner={owner}, seq={seq}, "
     "content={content}, parents={parents}, type={type})",
     {"key": "'k'", "owner": "'o'", "seq": "3", "content": "{}", "parents": "[]",
      "type": "'record'"}),
    *[(f"{fw}.fenced_tool", f"from icore.integrations.{mod} import {fn} as fenced_tool\n",
       "fenced_tool({tool}, depends_on={depends_on}, agent={agent})",
       {"tool": "t", "depends_on": "{'k/1'}", "agent": "ag"})
      for fw, mod, fn in (("lg", "langgraph", "fenced_tool"),
                          ("oa", "openai_agents", "fenced_function_tool"),
                          ("ag2", "ag2", "fenced_tool"))],
    ("RunRecorder", "from icore.integrations import RunRecorder\n",
     "RunRecorder({run_id}, question={question}, agents={agents}, "
     "ground_truth={ground_truth}).jsonl()",
     {"run_id": "'r'", "question": "'q'", "agents": "{'a': 'x'}", "ground_truth": "'1'"}),
    ("recorder.add", "from icore.integrations import RunRecorder\nrec = RunRecorder()\n",
     "rec.add({agent}, {kind}, {content}, at={at})",
     {"agent": "'a'", "kind": "'thought'", "content": "'x'", "at": "1.0"}),
    ("recorder.tool_call", "from icore.integrations import RunRecorder\nrec = RunRecorder()\n",
     "rec.tool_call({agent}, {tool}, {args}, {result}, at={at})",
     {"agent": "'a'", "tool": "'t'", "args": "{'x': 1}", "result": "2", "at": "1.0"}),
    ("recorder.write", "from icore.integrations import RunRecorder\nrec = RunRecorder()\n"
     "rec.add('u', 'task', 'q')\n", "rec.write({path})",
     {"path": "os.path.join(DIR, 'run.jsonl')"}),
    *[(f"adapters.{fn}", _TRACE + f"from icore.adapters import {fn}\n", f"{fn}({{path}})",
       {"path": "GOOD"})
      for fn in ("audit_file", "audit_path", "load_trace", "load_jsonl", "load_otlp",
                 "load_who_and_when", "read_prov", "scan_paths")],
    ("adapters.parse_jsonl", _TRACE, "parse_jsonl({text}, file={file}, run_id={run_id})",
     {"text": "JSONL", "file": "'f'", "run_id": "'r'"}),
    ("adapters.parse_otlp", _TRACE + "from icore.adapters import parse_otlp\n",
     "parse_otlp({text}, file={file})", {"text": "'{\"resourceSpans\": []}'", "file": "'f'"}),
    ("adapters.audit_trace", _TRACE + "from icore.adapters import audit_trace\n",
     "audit_trace({trace})", {"trace": "parse_jsonl(JSONL)"}),
    ("adapters.OtlpJsonFileExporter", "from icore.adapters import OtlpJsonFileExporter\n",
     "OtlpJsonFileExporter({path})", {"path": "os.path.join(DIR, 's.otlp.jsonl')"}),
    ("adapters.OtelExporter", "from icore.adapters import OtelExporter\n",
     "OtelExporter(endpoint={endpoint}, headers={headers})",
     {"endpoint": "'file:' + os.path.join(DIR, 'o.jsonl')", "headers": "None"}),
    ("adapters.traces_endpoint", "from icore.adapters import traces_endpoint\n",
     "traces_endpoint({url})", {"url": "'http://127.0.0.1:4318'"}),
    ("mcp.load_manifest", "from icore.mcp import load_manifest\n", "load_manifest({path})",
     {"path": "os.path.join(DIR, 'gw.yaml')"}),
    ("live.load_manifest", "from icore.live import load_manifest\n", "load_manifest({path})",
     {"path": "os.path.join(DIR, 'run.yaml')"}),
    ("net.TeamManifest.load", "from icore.net import TeamManifest\n",
     "TeamManifest.load({path})", {"path": "os.path.join(DIR, 'team.yaml')"}),
    ("state.load_declaration", "from icore.state import load_declaration\n",
     "load_declaration({path})", {"path": "os.path.join(DIR, 'd.yaml')"}),
    ("state.SQLiteLog", "from icore.state import SQLiteLog\n", "SQLiteLog({path})",
     {"path": "os.path.join(DIR, 'log.db')"}),
    ("net.init_team_certs", "from icore.net import init_team_certs\n",
     "init_team_certs({out_dir}, {agents}, days={days})",
     {"out_dir": "os.path.join(DIR, 'certs')", "agents": "['a']", "days": "2"}),
]



def _code(setup: str, call: str) -> str:
    """The case's script: the setup (a typed error there is no verdict), then the call."""
    body = (_SETUP + setup).replace("\n", "\n    ").strip()
    return ("import sys\nfrom icore.errors import IcoreError\ntry:\n    " + body +
            "\nexcept IcoreError as e:\n    print('SETUP', e); sys.exit(3)\n" +
            cli_cases._API_HEAD.format(body="    " + call))


def api_types(b: Builder, per_seed: int = 120) -> None:
    """``per_seed`` sampled (entry point, argument, bad value) calls, one a subprocess."""
    triples = [(tid, arg, bad) for tid, _, _, good in TARGETS for arg in good for bad in BAD]
    for tid, arg, bad in sorted(b.rng.sample(triples, min(per_seed, len(triples)))):
        _, setup, template, good = next(t for t in TARGETS if t[0] == tid)
        cid = f"apitype/{tid}/{arg}={bad}"
        b._dir(cid)
        b.cases.append(Case(cid, "api-types",
                            ["PY", _code(setup, template.format(**{**good, arg: BAD[bad]}))],
                            names=[arg, tid.split(".")[-1], arg.split("_")[-1], "file="],
                            timeout=60, ok_codes=(0, 1)))


def _check_targets() -> None:  # pragma: no cover - a developer's check of the table
    """Every target with its good arguments (``python -m badinput.api_types``)."""
    import subprocess
    import sys
    for tid, setup, template, good in TARGETS:
        r = subprocess.run([sys.executable, "-c", _code(setup, template.format(**good))],
                           capture_output=True, text=True, timeout=120, env={**os.environ})
        print(tid, r.returncode, (r.stdout + r.stderr).strip().splitlines()[-1:])


if __name__ == "__main__":  # pragma: no cover
    _check_targets()
