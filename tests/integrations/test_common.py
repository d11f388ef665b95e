"""Framework-neutral parts: the recorder, the replicator's key names, extras and layering."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from icore._extras import require
from icore.adapters import parse_jsonl
from icore.errors import MissingExtra
from icore.fence import bind_action
from icore.integrations import FenceGuard, Replicator, RunRecorder
from icore.records import derive

SRC = Path(__file__).resolve().parents[2] / "src" / "icore"
REQ, PLAN = "req/trip-17", "plan/trip-17"


def test_recorder_lines_are_the_jsonl_format(tmp_path: Path) -> None:
    """What the recorder writes is what the JSONL importer reads, step for step."""
    rec = RunRecorder("r1", agents={"planner": "plans"})
    rec.task("book a hotel")
    rec.turn("planner", "calling book", tool_calls=[{"name": "book"}])
    rec.handoff("planner", "executor")
    rec.tool_call("executor", "book", {"destination": "Porto"}, "booked", error=False)
    rec.tool_call("executor", "book", {"destination": "Faro"}, "refused", error=True)
    rec.finish("planner", "done")
    trace = parse_jsonl(rec.write(tmp_path / "r1.jsonl").read_text(encoding="utf-8"))
    assert [s.kind.value for s in trace.steps] == ["task", "output", "instruction",
                                                   "tool_output", "tool_output",
                                                   "termination"]
    assert [s.exitcode for s in trace.steps if s.kind.value == "tool_output"] == [0, 1]
    assert trace.steps[2].to == "executor" and trace.agents["planner"] == "plans"
    assert rec.audit().trace.id == "r1"


def test_blocked_lineage_incomplete_names_the_key(trip: Any) -> None:
    """A record the executor never received: the message names ``key v<seq>``."""
    st = trip.stores
    r2 = derive(key=REQ, owner="traveler", seq=st["traveler"].next_seq(), type="requirement",
                content={"destination": "Porto"}, inputs=[st["traveler"].get(
                    st["traveler"].head(REQ).record_id)])
    st["traveler"].commit(r2, writer="traveler")  # not replicated to the executor
    plan = derive(key=PLAN, owner="planner", seq=st["planner"].next_seq(),
                  content=bind_action("book", {"destination": "Porto"}), inputs=[r2])
    st["planner"].commit(plan, writer="planner",
                         expected_head=st["planner"].head(PLAN).record_id)
    st["executor"].install(plan)  # the plan arrives, its input does not
    guard = FenceGuard(fence=trip.fence, depends_on={REQ}, replicator=trip.replicator)
    gated = guard.run("book", trip.book, {"destination": "Porto"}, [plan.id])
    assert not gated.executed and gated.result.final.reason.value == "lineage_incomplete"
    assert "req/trip-17 seq 2" in gated.message
    trip.replicator.publish(r2, to=["executor"])  # the replication helper fixes it
    assert guard.run("book", trip.book, {"destination": "Porto"}, [plan.id]).executed


def test_args_not_bound_by_the_plan_block(trip: Any) -> None:
    """The model's arguments must be the plan's (issue 12): else ``args_mismatch``."""
    guard = FenceGuard(fence=trip.fence, depends_on={REQ})
    gated = guard.run("book", trip.book, {"destination": "Paris"}, [trip.first_plan.id])
    assert gated.result.final.reason.value == "args_mismatch"
    assert "exactly the plan's arguments" in gated.message and trip.booked == []


def test_replicator_rejects_unknown_agents(trip: Any) -> None:
    """``needs`` and ``to`` must name agents with a store."""
    from icore.errors import IntegrationError

    with pytest.raises(IntegrationError):
        Replicator(trip.stores, needs={"ghost": ["req/*"]})
    with pytest.raises(IntegrationError):
        trip.replicator.publish(trip.first_plan, to=["ghost"])


def test_missing_extra_is_a_one_line_hint() -> None:
    """A missing dependency names the extra to install."""
    with pytest.raises(MissingExtra) as ei:
        require("icore_no_such_module_x", "bench", feature="icore bench")
    msg = str(ei.value)
    assert "pip install 'icore[bench]'" in msg and "\n" not in msg
    assert isinstance(ei.value, ImportError)


BLOCK = """
import sys, importlib.abc
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.split('.')[0] in {BLOCKED}:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
        return None
sys.meta_path.insert(0, Block())
"""


def _without(mods: set[str], code: str) -> subprocess.CompletedProcess[str]:
    script = BLOCK.format(BLOCKED=sorted(mods)) + code
    return subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=60, check=False)


def test_base_install_works_without_bench_or_framework_extras() -> None:
    """Without numpy/scipy/matplotlib and the frameworks: the fence, memory, state and the
    CLI work; an integration fails with the install hint (the lab's statistics: the same
    check in tests/lab/bench_planfence/test_missing_extra.py)."""
    heavy = {"numpy", "scipy", "matplotlib", "langgraph", "langchain_core", "agents",
             "autogen", "ag2", "crewai", "networkx"}
    code = """
import icore.records, icore.memory, icore.fence, icore.net, icore.state, icore.adapters
import icore.cli, icore.integrations
from icore.errors import MissingExtra
for f in (lambda: __import__("icore.integrations.langgraph"),
          lambda: __import__("icore.integrations.openai_agents"),
          lambda: __import__("icore.integrations.ag2")):
    try:
        f()
    except MissingExtra as e:
        print(str(e))
"""
    out = _without(heavy, code)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert [ln.split("pip install ")[1].split()[0] for ln in lines] == [
        "'icore[langgraph]'", "'icore[openai-agents]'", "'icore[ag2]'"]


def test_integrations_import_only_public_api() -> None:
    """design.md 2: integrations use the public API of records/fence/memory/workspace/state/
    adapters."""
    allowed = {"icore.records", "icore.fence", "icore.memory", "icore.workspace",
               "icore.state", "icore.adapters", "icore.errors", "icore._extras",
               "icore._files",  # stdlib-only file rules every layer shares (its docstring)
               "icore._strict_json",  # strict JSON text, stdlib-only, shared likewise
               "icore._line_digest",  # event-line digests (#29), stdlib-only likewise
               "icore._line_chain",  # each writer's chain of digested lines (#29), likewise
               "icore._writer_mark",  # the header's writer marker (#29), likewise
               "icore._line_seal",  # every line's whole-line digest (qa-new14), likewise
               "icore._arg_diff",  # tool-call arguments compared (qa-new14), likewise
               "icore._flock"}  # lock descriptors a forked child drops (#29), likewise
    for path in sorted((SRC / "integrations").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                name = node.module
                if name.startswith("icore.") and not name.startswith("icore.integrations"):
                    assert name in allowed, f"{path.name} imports {name}"


_EVENTS = st.lists(st.tuples(
    st.sampled_from(["task", "turn", "handoff", "plan", "tool", "tool_error", "finish"]),
    st.text(min_size=1, max_size=12), st.text(max_size=40),
    st.one_of(st.none(), st.floats(min_value=0, max_value=1e9, allow_nan=False))),
    min_size=1, max_size=25)


@given(_EVENTS)
def test_any_recorded_run_parses_as_recorded(events: list[tuple[str, str, str, Any]]) -> None:
    """Whatever is recorded (any names, texts, times), ``icore audit``'s importer reads
    the same events, in time order, with the same kinds and exit codes."""
    rec = RunRecorder("prop")
    kinds = {"task": "task", "turn": "output", "handoff": "instruction", "plan": "plan",
             "tool": "tool_output", "tool_error": "tool_output", "finish": "termination"}
    for what, agent, text, at in events:
        if what == "task":
            rec.task(text, agent=agent, at=at)
        elif what == "turn":
            rec.turn(agent, text, at=at)
        elif what == "handoff":
            rec.handoff(agent, "other", text, at=at)
        elif what == "plan":
            rec.add(agent, "plan", text, at=at)
        elif what in ("tool", "tool_error"):
            rec.tool_call(agent, "t", {"x": text}, text, error=what == "tool_error", at=at)
        else:
            rec.finish(agent, text, at=at)
    trace = rec.trace()
    assert [s.kind.value for s in trace.steps] == rec.kinds()
    assert sorted(rec.kinds()) == sorted(kinds[e[0]] for e in events)
    assert rec._at == sorted(rec._at)


@pytest.mark.parametrize("framework", ["langgraph", "openai_agents", "ag2", "crewai"])
def test_docs_page_starts_with_a_ten_line_snippet(framework: str) -> None:
    """docs/integrations-<framework>.md opens with a <= 10-line snippet using the package,
    or (issue 28) shows a plain app and the diff that fences it: <= 10 added code lines."""
    page = SRC.parents[1] / "docs" / f"integrations-{framework.replace('_', '-')}.md"
    full = page.read_text(encoding="utf-8")
    if "```diff\n" in full:
        diff = full.split("```diff\n", 1)[1].split("```", 1)[0].splitlines()
        added = [ln[1:] for ln in diff if ln.startswith("+") and ln[1:].strip()]
        assert len(added) <= 10, added
        assert any(f"from icore.integrations.{framework} import" in ln for ln in added)
        plain = full.split("```python\n", 1)[1].split("```", 1)[0]
        assert "icore" not in plain  # the plain app comes first
        ast.parse("\n".join(ln[1:] for ln in diff if not ln.startswith("-")))
        return
    text = full.split("```python\n", 1)[1].split("```", 1)[0]
    assert len(text.splitlines()) <= 10
    assert f"from icore.integrations.{framework} import" in text
    ast.parse(text)
