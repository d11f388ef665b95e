"""Tool-call mode negotiation, slots and infrastructure failures of the LLM backend,
against a local OpenAI-compatible fake server (a real HTTP server on 127.0.0.1)."""

from __future__ import annotations

from typing import Any

import pytest

from icore.agents import (
    MODES,
    DecisionRequest,
    LLMConfig,
    LLMDecider,
    LLMUnavailable,
    ToolSpec,
    decision_tally,
    enum_prop,
    negotiate,
    object_schema,
)


def _cfg(url: str, **kw: Any) -> LLMConfig:
    kw.setdefault("timeout_s", 2.0)
    return LLMConfig(base_url=url, model="fake-model", backoff_s=0.01, **kw)


def _request() -> DecisionRequest:
    tool = ToolSpec("submit_plan", "Submit the plan.", object_schema({
        "action": enum_prop(["book"]), "candidate": enum_prop(["H2", "H5"])}))
    return DecisionRequest("planner", "reservation", {"candidates": ["H2", "H5"]}, tool,
                           {"action": "book", "candidate": "H2"})


@pytest.mark.parametrize(("supported", "expected"), [
    ({"named", "required", "auto"}, "named"),
    ({"required", "auto"}, "required"),
    ({"json_schema", "auto"}, "json_schema"),
    ({"json_object", "auto"}, "json_object"),
    ({"auto"}, "auto"),
])
def test_negotiation_takes_the_first_mode_the_server_offers(
        fake_llm: Any, supported: set[str], expected: str) -> None:
    """Unsupported modes answer HTTP 500 (as llama-cpp-python does); the first mode that
    answers is used, and every probed mode is reported."""
    fake_llm.modes = frozenset(supported)
    neg = negotiate(_cfg(fake_llm.base_url), use_cache=False)
    assert neg.mode == expected
    assert [p["mode"] for p in neg.probes] == list(MODES[: MODES.index(expected) + 1])
    assert all(not p["ok"] for p in neg.probes[:-1]) and neg.probes[-1]["ok"]
    assert neg.constrained == (expected in ("named", "json_schema", "json_object"))


def test_response_format_that_ignores_the_schema_is_not_taken(fake_llm: Any) -> None:
    """A server that accepts response_format but answers free JSON does not constrain
    decoding: the probe (whose prompt hides the required value) rejects it."""
    fake_llm.modes = frozenset({"json_schema", "json_object", "auto"})
    fake_llm.enforces = frozenset()
    neg = negotiate(_cfg(fake_llm.base_url), use_cache=False)
    assert neg.mode == "auto"
    notes = {p["mode"]: p["note"] for p in neg.probes}
    assert "schema not enforced" in notes["json_schema"]


def test_content_mode_decisions_are_checked_and_corrected(fake_llm: Any) -> None:
    """In a response_format mode the schema is shown in the system message, the content
    is checked like a call, and a violation gets the one public correction."""
    fake_llm.modes = frozenset({"json_object"})
    fake_llm.script = {"submit_plan": ["hallucinate", "valid"]}
    d = LLMDecider(_cfg(fake_llm.base_url))
    out = d.decide(_request())
    assert out.ok and out.mode == "json_object" and out.responses == 2
    assert out.violations and "X999" in out.violations[0]
    body = fake_llm.bodies_for("submit_plan")[0]
    assert "tools" not in body and body["response_format"]["schema"]["required"]
    assert '"enum": ["H2", "H5"]' in body["messages"][0]["content"]


def test_no_mode_works_is_reported_not_raised_by_decide(fake_llm: Any) -> None:
    """Every probe refused: negotiate raises LLMUnavailable naming each mode; decide
    returns an infrastructure failure (no violation, no traceback)."""
    fake_llm.modes = frozenset()
    with pytest.raises(LLMUnavailable, match="no tool-call mode") as ei:
        negotiate(_cfg(fake_llm.base_url), use_cache=False)
    assert len(ei.value.fields["probes"]) == len(MODES)
    out = LLMDecider(_cfg(fake_llm.base_url)).decide(_request())
    assert not out.ok and out.infrastructure and out.violations == ()


def test_unreachable_server() -> None:
    """A refused connection is an infrastructure failure, retried, then reported."""
    with pytest.raises(LLMUnavailable, match="unreachable"):
        negotiate(_cfg("http://127.0.0.1:9/v1", retries=1), use_cache=False)


@pytest.mark.parametrize("first", ["http500", "http503", "timeout"])
def test_server_error_is_retried_not_a_violation(fake_llm: Any, first: str) -> None:
    """A 5xx or a timeout is retried with backoff and never counts as a schema
    violation or uses the correction."""
    fake_llm.sleep_s = 3.0
    fake_llm.script = {"submit_plan": [first, "valid"]}
    out = LLMDecider(_cfg(fake_llm.base_url, timeout_s=1.0)).decide(_request())
    assert out.ok and out.violations == () and out.responses == 1
    assert out.infra_failures == 1 and not out.infrastructure


def test_persistent_server_error_fails_as_infrastructure(fake_llm: Any) -> None:
    """After the retries the attempt fails as an infrastructure failure."""
    fake_llm.script = {"submit_plan": ["http500"] * 5}
    out = LLMDecider(_cfg(fake_llm.base_url, retries=2)).decide(_request())
    assert not out.ok and out.infrastructure and out.infra_failures == 3
    assert out.violations == () and "HTTP 500" in out.error
    t = decision_tally([out.to_dict()])
    assert (t["infra_unrecovered"], t["unrecovered"], t["violations"]) == (1, 0, 0)


def test_a_client_error_after_negotiation_is_not_retried(fake_llm: Any) -> None:
    """A 4xx other than 408/409/429 fails at once (retrying cannot help)."""
    d = LLMDecider(_cfg(fake_llm.base_url))
    assert d.negotiation.mode == "named"
    fake_llm.modes = frozenset({"required"})
    fake_llm.unsupported_status = 400
    out = d.decide(_request())
    assert out.infrastructure and out.infra_failures == 1 and "HTTP 400" in out.error


def test_slots_from_props_and_config(fake_llm: Any) -> None:
    """llama.cpp's /props gives the slots; an explicit value wins; else one is assumed."""
    assert negotiate(_cfg(fake_llm.base_url), use_cache=False).slots_source == "assumed"
    fake_llm.props = {"total_slots": 3}
    neg = negotiate(_cfg(fake_llm.base_url), use_cache=False)
    assert (neg.slots, neg.slots_source) == (3, "/props")
    neg = negotiate(_cfg(fake_llm.base_url, slots=2), use_cache=False)
    assert (neg.slots, neg.slots_source) == (2, "config")


def test_fixed_mode_skips_the_probe(fake_llm: Any) -> None:
    """tool_choice set to a mode: no probe request is sent."""
    d = LLMDecider(_cfg(fake_llm.base_url, tool_choice="auto"))
    assert d.decide(_request()).ok
    assert [b.get("tool_choice") for b in fake_llm.requests] == ["auto"]


def test_config_validation() -> None:
    """Bad modes, retries or slots are refused."""
    for kw in ({"tool_choice": "forced"}, {"retries": -1}, {"slots": 0}):
        with pytest.raises(ValueError, match=r"tool_choice|retries|slots"):
            LLMConfig("http://h/v1", "m", **kw)  # type: ignore[arg-type]
    env = {"ICORE_LLM_BASE_URL": "http://h/v1", "ICORE_LLM_MODEL": "m",
           "ICORE_LLM_TOOL_CHOICE": "auto", "ICORE_LLM_SLOTS": "4"}
    c = LLMConfig.from_env(env=env, tool_choice="negotiate")
    assert (c.tool_choice, c.slots) == ("auto", 4)
