"""CrewAI calls named per call: the audit's turn-args check and the durable attempts.

A fenced call's gate lines name its model tool call (``call_id``: the model's own id with
native function calling, a derived ``crewai-<digest>-<index>`` for a ReAct action) and
the recorded model turn's ``tool_calls`` carry the same id, so the audit holds the action
record against what the model asked (an edited argument is INVALID, naming it). Two calls
of one model message are two durable identities (``<digest>:<index>``): on a
``Workspace.sqlite`` folder both run once, two rows; the same crew replayed asks the same
calls again: refused ``already_ran``. A real ``Crew`` with a scripted ``BaseLLM`` that
emits CrewAI's call events; runs in ``.venv-crewai``.
"""

from __future__ import annotations

import importlib.util
import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

if importlib.util.find_spec("crewai") is None:
    pytest.skip("icore[crewai] runs in .venv-crewai", allow_module_level=True)
pytest.importorskip("crewai", reason="icore[crewai] runs in .venv-crewai")

from crewai import Agent, Crew, Task
from crewai.tools import tool

from icore.cli import app as cli
from icore.integrations import RunRecorder
from icore.integrations.crewai import fenced_crewai_tool, recording
from icore.integrations.crewai._call_ids import call_place, model_calls
from icore.workspace import Workspace

from .test_crewai_audit import Emitting
from .test_crewai_turns import act, call


def _write(p: Path, lines: list[dict[str, Any]]) -> Path:
    p.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    return p


def _stripped(lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """As a writer without digests would have written it (no marker, digest or chain)."""
    for x in lines:
        for k in ("digest", "run_digest", "chain", "chain_end"):
            x.pop(k, None)
        if "run" in x:
            x["run"].pop("icore", None)
        pf = x.get("planfence")
        if isinstance(pf, dict) and isinstance(pf.get("decision"), dict):
            pf["decision"].pop("digest", None)
    return lines


def _turn(lines: list[dict[str, Any]], tool: str) -> tuple[int, dict[str, Any]]:
    return next((n, x) for n, x in enumerate(lines) if x.get("kind") == "output" and any(
        c.get("name") == tool for c in x.get("tool_calls") or ()))


def _audit(path: Path, *args: str) -> tuple[int, str, dict[str, Any]]:
    """``icore audit PATH --json ... ARGS``: (exit code, stdout, the run)."""
    js = path.parent / f"{path.stem}.json"
    res = CliRunner().invoke(cli, ["audit", str(path), "--out", str(path.parent / path.stem),
                                   "--json", str(js), *args], env={"COLUMNS": "200"})
    assert res.exit_code in (0, 3), res.output
    return res.exit_code, res.output, json.loads(js.read_text(encoding="utf-8"))["runs"][0]


def _emitting(steps: list[Any], react: bool = False) -> Emitting:
    llm = Emitting(model="scripted")
    llm._steps = list(steps)
    llm._react = react
    return llm


class Depot:
    """Warehouses owned by ``warehouse``; a clerk reading stock and a fenced transfer."""

    def __init__(self, folder: Path | None = None, *, sequential: bool = False) -> None:
        own = {"stock/*": "warehouse"}
        self.ws = Workspace.sqlite(own, folder) if folder is not None else Workspace(own)
        for wh in ("W1", "W2"):
            if self.ws.head(f"stock/{wh}") is None:
                self.ws.put(f"stock/{wh}", {"qty": 10}, by="warehouse")
        clerk = self.ws.agent("clerk")
        self.moved: list[tuple[str, int]] = []
        moved = self.moved

        @tool("get_stock")
        def get_stock(wh: str) -> str:
            """Read a warehouse's stock level."""
            return json.dumps(clerk.read(f"stock/{wh}"))

        @tool("transfer")
        def transfer(wh: str, qty: int) -> str:
            """Move qty units out of warehouse wh."""
            moved.append((wh, qty))
            return f"moved {qty} from {wh}"

        fenced = fenced_crewai_tool(transfer, agent=clerk,
                                    depends_on=lambda a: {f"stock/{a['wh']}"})
        if sequential:  # CrewAI then runs a message's calls one by one
            fenced.max_usage_count = 1000
        self.tools = [get_stock, fenced]

    def crew(self, llm: Any) -> Crew:
        a = Agent(role="clerk", goal="move stock", backstory="logistics", tools=self.tools,
                  llm=llm, max_iter=8)
        return Crew(agents=[a], tasks=[Task(description="move stock", expected_output="done",
                                            agent=a)])


def _native() -> list[Any]:
    return [[call("get_stock", wh="W1"), call("get_stock", wh="W2")],
            [call("transfer", wh="W1", qty=4), call("transfer", wh="W2", qty="3")], "done"]


def _react() -> list[Any]:
    return [act("get_stock", wh="W1"), act("transfer", wh="W1", qty="4"),
            "Thought: done\nFinal Answer: done"]


def _recorded(react: bool) -> tuple[list[dict[str, Any]], Depot]:
    d = Depot()
    rec = RunRecorder("crew-ids")
    with recording(rec):
        d.crew(_emitting(_react() if react else _native(), react)).kickoff()
    return [json.loads(x) for x in rec.jsonl().splitlines()], d


@pytest.mark.parametrize("react", [False, True], ids=["native", "react"])
def test_a_crew_run_links_its_calls_and_audits_clean(tmp_path: Path, react: bool) -> None:
    lines, d = _recorded(react)
    assert sorted(d.moved) == ([("W1", 4)] if react else [("W1", 4), ("W2", 3)])
    _, turn = _turn(lines, "transfer")
    ids = [c["id"] for c in turn["tool_calls"]]
    linked = {x["call_id"] for x in lines if x.get("call_id") and x.get("task")}
    assert linked == set(ids) and len(ids) == (1 if react else 2)
    if react:
        assert ids[0].startswith("crewai-") and ids[0].endswith("-0")
    assert turn["tool_calls"][-1]["args_normal"]["qty"] in (3, 4)  # "3" / "4" read as int
    code, _o, got = _audit(_write(tmp_path / "crew.jsonl", lines), "--fail-on", "invalid")
    assert code == 0 and {lv["status"] for lv in got["lineage"]} == {"valid"}
    assert not [w for w in got.get("warnings", ()) if "differ" in w or "digest" in w]


@pytest.mark.parametrize("react", [False, True], ids=["native", "react"])
def test_an_edited_argument_makes_the_call_invalid(tmp_path: Path, react: bool) -> None:
    lines, _ = _recorded(react)
    plain = _stripped(lines)  # a writer without digests: only the turn check reads the edit
    first = _turn(plain, "transfer")[1]["tool_calls"][0]
    first.pop("args_normal", None)
    first["args"]["qty"] = 40
    code, _o, got = _audit(_write(tmp_path / "forged.jsonl", plain), "--fail-on", "invalid")
    bad = [lv for lv in got["lineage"] if lv["status"] == "INVALID"]
    assert code == 3 and len(bad) == 1
    assert f"arguments of transfer call {first['id']} differ" in bad[0]["reason"]
    assert "qty 40 vs 4" in bad[0]["reason"]


def _rows(folder: Path) -> list[tuple[str, str]]:
    with sqlite3.connect(folder / "icore-attempts.sqlite") as db:
        return sorted(db.execute("SELECT tool, how FROM calls").fetchall())


@pytest.mark.parametrize("sequential", [False, True], ids=["parallel", "sequential"])
@pytest.mark.parametrize("same", [False, True], ids=["different_args", "same_args"])
def test_two_calls_of_one_message_are_two_durable_calls(tmp_path: Path, same: bool,
                                                        sequential: bool) -> None:
    """Each runs once, two ``ran`` rows; the crew replayed (a restart: the model asked the
    same from the same messages) runs neither again: both refused ``already_ran``."""
    qty = 4 if same else 3
    steps = [[call("get_stock", wh="W1")],
             [call("transfer", wh="W1", qty=4), call("transfer", wh="W1", qty=qty)], "done"]
    d = Depot(tmp_path / "db", sequential=sequential)
    d.crew(_emitting(steps)).kickoff()
    assert sorted(d.moved) == sorted([("W1", 4), ("W1", qty)])
    assert _rows(tmp_path / "db") == [("transfer", "ran"), ("transfer", "ran")]
    again = Depot(tmp_path / "db", sequential=sequential)
    llm = _emitting([[call("get_stock", wh="W1")],
                     [call("transfer", wh="W1", qty=4), call("transfer", wh="W1", qty=qty)],
                     "done"])
    again.crew(llm).kickoff()
    assert again.moved == []
    told = llm.tool_results()
    assert sum("already_ran" in t for t in told) == 2, told


class _Executor:
    """What :func:`call_place` reads of a CrewAI executor: its messages and state."""

    def __init__(self, messages: list[Any]) -> None:
        self.messages = messages
        self.state = None


_CALLS = st.lists(st.tuples(st.sampled_from(["pay", "ship"]),
                            st.dictionaries(st.sampled_from(["a", "b"]),
                                            st.integers(0, 3), max_size=2)),
                  min_size=1, max_size=6)


@settings(max_examples=60, deadline=None)
@given(calls=_CALLS, order=st.randoms(use_true_random=False))
def test_the_calls_of_one_message_take_distinct_places_matching_them(
        calls: list[tuple[str, dict[str, int]]], order: Any) -> None:
    """Whatever order CrewAI's threads ask in, every call of a message gets its own index
    (no two share one), and each index is a call with the same tool and arguments."""
    msg = {"role": "assistant", "content": None, "tool_calls": [
        {"id": f"m{i}", "type": "function",
         "function": {"name": n, "arguments": json.dumps(a)}}
        for i, (n, a) in enumerate(calls)]}
    ex = _Executor([{"role": "user", "content": "go"}, msg])
    asks = list(range(len(calls)))
    order.shuffle(asks)
    got = {i: call_place(ex, calls[i][0], calls[i][1]) for i in asks}
    assert len({p.index for p in got.values()}) == len(calls)
    for i, p in got.items():
        assert calls[p.index] == calls[i] and p.model_id == f"m{p.index}"
        assert p.name == calls[i][0] and not p.react


@pytest.mark.parametrize(("response", "want"), [
    ("Thought: x\nAction: Pay Order\nAction Input: {\"a\": 1}",
     [{"name": "pay_order", "args": {"a": 1}, "id": "crewai-" + "ab" * 10 + "-0"}]),
    ("Thought: x\nAction: pay\nAction Input: not json",  # no object: nothing compared
     [{"name": "pay", "id": "crewai-" + "ab" * 10 + "-0"}]),
    ("Thought: x\nAction: !!!\nAction Input: {}", []),  # no tool name: no tool call
    ("Thought: done\nFinal Answer: done", []),
    ([{"function": {"name": "pay", "arguments": "{\"a\": 1}"}}],  # no id of its own
     [{"name": "pay", "args": {"a": 1}}]),
    ([{"call_id": "c9", "id": "fc_1", "name": "pay", "arguments": "{}"}],  # Responses API
     [{"name": "pay", "args": {}, "id": "c9"}]),
])
def test_a_recorded_turn_names_the_calls_the_model_asked_for(response: Any,
                                                              want: list[Any]) -> None:
    assert model_calls(response, "ab" * 32) == want
