"""The LLM-backed iCORE team against a real local OpenAI-compatible HTTP endpoint: grounded
tool calls, one public correction, then a rejected proposal (never a fallback)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from icore.agents import LLMUnavailable
from icore.audit import AuditLoop, AuditRunResult, LoopConfig
from icore.state import Note, State
from icore_lab.agents._llm_team import LLMSettings, LLMTeam
from icore_lab.agents._sim_world import SimWorld
from icore_lab.agents._simulated import SimEnvironment, introduce
from icore_lab.workloads._tasks import TaskMode, declaration, make_instance

TEAM_TOOLS = ("take_next_action", "answer_feedback")


def _run(url: str, mode: TaskMode = TaskMode.BUILD_CHAIN) -> tuple[LLMTeam, State, AuditRunResult]:
    inst = make_instance(mode, 0)
    world = SimWorld(inst)
    team = LLMTeam.create(inst, world, LLMSettings(base_url=url, model="fake", timeout_s=5))
    x = State(declaration(inst))
    introduce(x, inst)
    res = AuditLoop(x, team, env=SimEnvironment(world),
                    config=LoopConfig(max_steps=inst.budget, head_view=world.head_view)).run()
    return team, x, res


def _team_bodies(fake: Any) -> list[dict[str, Any]]:
    return [b for t in TEAM_TOOLS for b in fake.bodies_for(t)]


def test_llm_team_runs_under_icore_audit(fake_llm: Any) -> None:
    """Every decision is one grounded tool call (A.2 prompt shape); the feedback text the
    model reads is exactly the text logged in X."""
    team, x, res = _run(fake_llm.base_url)
    bodies = _team_bodies(fake_llm)
    assert team.requests == len(bodies) == res.agent_calls
    assert team.tally()["violations"] == 0 and team.rejected == 0
    assert team.prompt_tokens == 10 * team.requests
    for b in bodies:
        assert len(b["tools"]) == 1 and isinstance(b["tool_choice"], dict)
        assert b["messages"][0]["content"].startswith("You are ")
        params = b["tools"][0]["function"]["parameters"]
        assert params["additionalProperties"] is False
        assert all("enum" in p for p in params["properties"].values())
    fb_notes = [e.body.payload["text"] for e in x.entries
                if isinstance(e.body, Note) and e.body.kind == "feedback"]
    asked = [json.loads(b["messages"][1]["content"]).get("feedback")
             for b in fake_llm.bodies_for("answer_feedback")]
    assert fb_notes, "the run produced feedback"
    assert asked and all(a in fb_notes for a in asked)
    assert res.proposals > 0 and res.steps > 0


def test_invalid_output_is_a_rejected_proposal_not_a_fallback(fake_llm: Any) -> None:
    """A model that never answers the schema: each decision gets one public correction
    and then nothing is proposed or recovered (no first option, no auditor alternative,
    no simulator choice)."""
    fake_llm.answer_fn = lambda body: {"bogus": 1}
    team, x, res = _run(fake_llm.base_url)
    t = team.tally()
    assert res.proposals == 0 and res.accepted_recoveries == 0
    assert t["decisions"] == team.rejected == res.agent_calls > 0
    assert t["responses"] == 2 * t["decisions"] and t["corrections"] == t["decisions"]
    assert t["unrecovered"] == t["decisions"] and t["accepted"] == 0
    corrections = [b["messages"][-1]["content"] for b in _team_bodies(fake_llm)
                   if len(b["messages"]) == 3]
    assert corrections and all("rejected" in c for c in corrections)
    assert not any(e.body.kind == "recovery" for e in x.entries if isinstance(e.body, Note))


def test_one_correction_then_accepted(fake_llm: Any) -> None:
    """A hallucinated option is corrected once and then accepted."""
    fake_llm.script = {"take_next_action": ["hallucinate", "valid"]}
    team, _, res = _run(fake_llm.base_url, TaskMode.DEADLINE)
    first = team.decisions[0]
    assert first["ok"] and first["responses"] == 2 and "X999" in first["violations"][0]
    assert res.proposals > 0


def test_server_failure_is_infrastructure_not_a_model_decision(fake_llm: Any) -> None:
    """A server that keeps answering HTTP 500 after negotiation: retried, then the run
    stops with LLMUnavailable; no decision counts as a schema violation."""
    fake_llm.script = {"take_next_action": ["http500"] * 10}
    with pytest.raises(LLMUnavailable, match="failed during an iCORE run"):
        _run(fake_llm.base_url)
    assert len(fake_llm.bodies_for("take_next_action")) == 4  # 1 + 3 retries


def test_llm_team_needs_settings_or_decider() -> None:
    """Constructing without an endpoint is a usage error."""
    inst = make_instance(TaskMode.DEADLINE, 0)
    with pytest.raises(ValueError, match="settings or a decider"):
        LLMTeam(inst=inst, world=SimWorld(inst))


def test_cli_real_llm_setting(fake_llm: Any, tmp_path: Path) -> None:
    """``icore bench icore --llm-base-url`` negotiates, runs the same evaluation with the
    LLM team and prints its decision counters."""
    from typer.testing import CliRunner

    from icore.cli import app

    url = fake_llm.base_url
    r = CliRunner().invoke(app, ["bench", "icore", "--per-mode", "1", "--mode", "deadline",
                                 "--jobs", "2", "--out", str(tmp_path),
                                 "--llm-base-url", url, "--llm-model", "fake"],
                           terminal_width=200)
    assert r.exit_code == 0, r.output
    assert "tool-call mode: named" in r.output and "jobs: 2 -> 1" in r.output
    assert "LLM team decisions" in r.output
    summary = json.loads((tmp_path / "summary.json").read_text(encoding="utf-8"))
    assert summary["agents"] == f"llm:fake@{url}"
    assert set(summary["llm"]) == {"mas_only", "passive", "audit"}
    assert summary["llm"]["audit"]["responses"] > 0
