"""The LLM backend against a local OpenAI-compatible fake server (planfence App. A.2)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from icore.agents import (
    DecisionRequest,
    LLMConfig,
    LLMDecider,
    ToolSpec,
    check_call,
    enum_prop,
    object_schema,
)
from icore.live import RunManifest, run_live
from icore.memory import SQLiteStore

HEX64 = re.compile(r"[0-9a-f]{64}")


def _request() -> DecisionRequest:
    tool = ToolSpec("submit_plan", "Submit the plan.", object_schema({
        "revision": enum_prop(["rev-abc"]), "action": enum_prop(["book"]),
        "candidate": enum_prop(["H2", "H5"])}))
    user = {"requirement": {"request": "trip-00", "city": "Lisbon"}, "revision": "rev-abc",
            "candidates": [{"id": "H2"}, {"id": "H5"}]}
    return DecisionRequest("planner", "reservation", user, tool,
                           {"revision": "rev-abc", "action": "book", "candidate": "H2"})


def _decider(url: str, timeout_s: float = 2.0, **kw: Any
             ) -> tuple[LLMDecider, list[dict[str, Any]]]:
    transcript: list[dict[str, Any]] = []
    cfg = LLMConfig(base_url=url, model="fake-model", api_key="k", timeout_s=timeout_s,
                    backoff_s=0.01, **kw)
    return LLMDecider(cfg, transcript=transcript), transcript


def test_valid_call_is_accepted(fake_llm: Any) -> None:
    """One valid call: accepted on the first response, in the negotiated named mode."""
    d, _ = _decider(fake_llm.base_url)
    out = d.decide(_request())
    assert out.ok and out.args == {"revision": "rev-abc", "action": "book", "candidate": "H2"}
    assert (out.responses, out.accepted, out.violations) == (1, 1, ())
    assert out.mode == "named" and d.negotiation.constrained
    body = fake_llm.bodies_for("submit_plan")[0]
    assert len(body["tools"]) == 1
    assert body["tool_choice"] == {"type": "function", "function": {"name": "submit_plan"}}
    assert body["tools"][0]["function"]["parameters"]["additionalProperties"] is False


@pytest.mark.parametrize("bad", ["hallucinate", "extra_field", "wrong_tool", "malformed",
                                 "no_call", "two_calls", "bad_body"])
def test_one_public_correction_then_accepted(fake_llm: Any, bad: str) -> None:
    """A violation gets one public correction (reason + tool name, no answer)."""
    fake_llm.script = {"submit_plan": [bad, "valid"]}
    d, _ = _decider(fake_llm.base_url)
    out = d.decide(_request())
    assert out.ok and out.responses == 2 and out.accepted == 1
    assert len(out.violations) == 1
    second = fake_llm.bodies_for("submit_plan")[-1]["messages"]
    correction = second[-1]["content"]
    assert "rejected" in correction and "'submit_plan'" in correction
    assert "H2" not in correction  # the correction never reveals the answer
    assert len(second) == 3 and second[0]["role"] == "system"  # isolated, no bad reply


@pytest.mark.parametrize(("first", "second"), [("hallucinate", "hallucinate"),
                                               ("malformed", "extra_field"),
                                               ("no_call", "two_calls")])
def test_second_violation_fails_the_attempt(fake_llm: Any, first: str, second: str) -> None:
    """A second violation fails the attempt; nothing is returned to commit."""
    fake_llm.script = {"submit_plan": [first, second]}
    d, _ = _decider(fake_llm.base_url)
    out = d.decide(_request())
    assert not out.ok and out.args is None
    assert out.responses == 2 and out.accepted == 0 and len(out.violations) == 2
    assert "second schema violation" in out.error


def test_check_call_rules() -> None:
    """Ids and actions are finite enumerations; additional fields are rejected."""
    tool = _request().tool
    ok, bad = check_call(tool, "submit_plan", '{"revision":"rev-abc","action":"book",'
                                              '"candidate":"H5"}')
    assert ok is not None and bad is None
    for args in ('{"revision":"rev-abc","action":"book","candidate":"H9"}',
                 '{"revision":"rev-abc","action":"cancel","candidate":"H5"}',
                 '{"revision":"rev-abc","candidate":"H5"}',
                 '{"revision":"rev-abc","action":"book","candidate":"H5","x":1}',
                 '[1]', 'nope'):
        assert check_call(tool, "submit_plan", args)[0] is None, args
    assert check_call(tool, "other", "{}")[1] is not None


def test_config_from_env() -> None:
    """Flags win over the environment; missing URL or model is an error."""
    env = {"ICORE_LLM_BASE_URL": "http://h/v1", "ICORE_LLM_MODEL": "m",
           "OPENAI_API_KEY": "sk"}
    c = LLMConfig.from_env(env=env)
    assert (c.base_url, c.model, c.api_key) == ("http://h/v1", "m", "sk")
    assert LLMConfig.from_env(model="other", env=env).model == "other"
    with pytest.raises(ValueError, match="base URL"):
        LLMConfig.from_env(env={"ICORE_LLM_MODEL": "m"})
    with pytest.raises(ValueError, match="model"):
        LLMConfig.from_env(env={"ICORE_LLM_BASE_URL": "u"})


def _llm_manifest(m: RunManifest, url: str) -> RunManifest:
    return m.with_(seeds=[0, 1], concurrency=1,
                   backend={"kind": "llm", "base_url": url, "model": "fake-model",
                            "timeout_s": 2.5})


def test_live_llm_run_end_to_end(manifest: RunManifest, run_dir: Path, fake_llm: Any) -> None:
    """Live agents behind the fake endpoint: corrected violations, a failed attempt that
    commits nothing, role-content-only prompts, accepted vs total responses counted."""
    fake_llm.script = {
        # task 0: malformed JSON then valid; task 1: valid
        "publish_shortlist": ["malformed", "valid", "valid"],
        # task 0: hallucinated id then valid, replan valid; task 1: two violations
        "submit_plan": ["hallucinate", "valid", "valid", "hallucinate", "extra_field"],
        "call_book": ["valid"],
        # task 0: a timeout (an infrastructure failure, retried), then the model repeats
        # an already-valid action
        "report_audit": ["timeout", "repeat_action"],
    }
    res = run_live(_llm_manifest(manifest, fake_llm.base_url), run_dir, policy="planfence")
    t0, t1 = res.tasks
    assert t0.success and t0.successful_replan and not t0.invalid
    assert t0.redundant_auditor == 1 and t0.audit_verdict == "repeat_action"
    # the timeout is no model response and no violation
    assert (t0.accepted, t0.responses) == (5, 7)
    assert (t0.llm["violations"], t0.llm["corrections"], t0.llm["unrecovered"],
            t0.llm["infra_failures"], t0.llm["infra_unrecovered"]) == (2, 2, 0, 1, 0)
    assert not t1.executed and "planner decision failed" in t1.error
    assert (t1.accepted, t1.responses) == (1, 3)
    assert (t1.llm["violations"], t1.llm["unrecovered"]) == (2, 1)
    assert res.negotiation["mode"] == "named" and res.summary()["llm"]["decisions"] == 7
    assert res.invalid_actions == 0 and not res.crashes
    # nothing committed from the rejected planner call
    om = manifest.ownership_map()
    with SQLiteStore(run_dir / "agents" / "planner-1.sqlite", om, "planner-1") as s:
        assert s.head("plan/reservation-01") is None
        assert s.head("plan/reservation-00") is not None
    with SQLiteStore(run_dir / "agents" / "executor-1.sqlite", om, "executor-1") as s:
        assert s.head("act/reservation-01") is None
    # model-facing content: role content only (no record ids, no owner/agent ids)
    agent_ids = [a.id for a in manifest.agents]
    for body in fake_llm.requests:
        text = json.dumps(body["messages"])
        assert not HEX64.search(text), text[:300]
        assert not any(a in text for a in agent_ids), text[:300]
    replans = [b for b in fake_llm.bodies_for("submit_plan")
               if "replan_required" in b["messages"][1]["content"]]
    assert len(replans) == 1 and len(replans[0]["messages"]) == 2  # isolated history
    # the transcript is kept per agent
    assert (run_dir / "agents" / "planner-1.llm.jsonl").is_file()


def test_cli_says_the_server_is_unreachable(tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """An unreachable endpoint: before any agent starts, the CLI says the model server is
    unusable and why (an infrastructure failure, not a model mistake), exit 1."""
    from typer.testing import CliRunner

    from icore.cli import app

    monkeypatch.setenv("ICORE_LLM_BACKOFF_S", "0.01")
    res = CliRunner().invoke(app, [
        "run", "--backend", "llm", "--llm-base-url", "http://127.0.0.1:9/v1",
        "--llm-model", "x", "--llm-timeout-s", "2", "--out", str(tmp_path)],
        terminal_width=400)
    assert "model server unusable" in res.output, res.output
    assert "APIConnectionError" in res.output and "Traceback" not in res.output
    assert res.exit_code == 1


def test_cli_run_with_a_server_that_refuses_forced_tools(
        tmp_path: Path, fake_llm: Any) -> None:
    """The server of the issue: forced and required tool_choice answer HTTP 500. The run
    negotiates another mode, says which, and completes the task."""
    from typer.testing import CliRunner

    from icore.cli import app

    fake_llm.modes = frozenset({"json_object", "auto"})
    res = CliRunner().invoke(app, [
        "run", "--backend", "llm", "--llm-base-url", fake_llm.base_url,
        "--llm-model", "fake", "--llm-timeout-s", "5", "--out", str(tmp_path)],
        terminal_width=400)
    assert res.exit_code == 0, res.output
    assert "tool-call mode: json_object (constrained decoding: yes (verified" in res.output
    assert "Model decisions" in res.output


@pytest.mark.slow
def test_cli_matched_study_prints_model_decisions_per_policy(
        tmp_path: Path, fake_llm: Any) -> None:
    """``icore run --matched --backend llm --seeds 0``: three families x one seed x three
    policies, and per policy the responses, violations, corrections, unrecovered and
    infrastructure failures (what ``make llm-check`` prints)."""
    from typer.testing import CliRunner

    from icore.cli import app

    fake_llm.script = {"submit_plan": ["hallucinate"]}  # one corrected violation
    res = CliRunner().invoke(app, [
        "run", "--matched", "--backend", "llm", "--llm-base-url", fake_llm.base_url,
        "--llm-model", "fake", "--seeds", "0", "--out", str(tmp_path)],
        terminal_width=220)
    assert res.exit_code == 0, res.output
    rows = json.loads((tmp_path / "matched.json").read_text())["rows"]
    assert [r["tasks"] for r in rows] == [3, 3, 3]
    assert sum(r["llm"]["corrections"] for r in rows) == 1
    assert all(r["mode"] == "named" for r in rows)
    assert "Model decisions" in res.output and "tool-call mode: named" in res.output
