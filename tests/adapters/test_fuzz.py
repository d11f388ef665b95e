"""Never a crash: arbitrary damage to a run gives a result or an AdapterError, nothing else."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from icore.adapters import AdapterError, audit_trace, parse_jsonl, parse_who_and_when_data

_json = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 200) | st.text(max_size=12),
    lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=6), c, max_size=3),
    max_leaves=6,
)
_texts = st.sampled_from([
    "", "Updated Ledger:\n{}", "Updated Ledger:\n{\"next_speaker\": {\"answer\": \"Nobody\"}}",
    "Initial plan:\n", "New plan:\n", "Stalled.... Replanning...", "Next speaker Ghost",
    "FINAL ANSWER: 1", "```python\nprint(1)\n```", "exitcode: 0\nCode output: 1", "TERMINATE",
    "Replan counter exceeded... Terminating.",
]) | st.text(max_size=30)
_roles = st.sampled_from([
    "human", "Orchestrator (thought)", "Orchestrator (-> Ghost)", "Orchestrator (-> websurfer)",
    "Orchestrator (termination condition)", "WebSurfer", "ghost", "Computer_terminal", "",
    "()", "x (-> )",
]) | st.text(max_size=12)


def _check(data: Any) -> None:
    try:
        t = parse_who_and_when_data(data, file="f.json")
    except AdapterError as e:
        err: AdapterError | None = e
    else:
        err = None
        audit_trace(t)
    assert err is None or (err.file == "f.json" and err.field)


# keep the loaded profile (deadline, examples) and allow the pure factory fixtures
_FIXTURE_OK = settings(
    settings.default,
    suppress_health_check=[*settings.default.suppress_health_check,
                           HealthCheck.function_scoped_fixture],
)


@_FIXTURE_OK
@given(st.data())
def test_damaged_magentic_runs(make_magentic: Callable[..., dict[str, Any]],
                               data: st.DataObject) -> None:
    """Replace fields, roles and contents of a Magentic-One run at random."""
    d = copy.deepcopy(make_magentic())
    for _ in range(data.draw(st.integers(1, 4))):
        i = data.draw(st.integers(0, len(d["history"]) - 1))
        what = data.draw(st.sampled_from(["role", "content", "entry"]))
        if not isinstance(d["history"][i], dict):
            continue
        if what == "role":
            d["history"][i]["role"] = data.draw(_roles)
        elif what == "content":
            d["history"][i]["content"] = data.draw(_texts)
        else:
            d["history"][i] = data.draw(_json)
    if data.draw(st.booleans()):
        d[data.draw(st.sampled_from(sorted(d)))] = data.draw(_json)
    _check(d)


@_FIXTURE_OK
@given(st.data())
def test_damaged_captain_runs(make_captain: Callable[..., dict[str, Any]],
                              data: st.DataObject) -> None:
    """Replace names, contents and top-level fields of a CaptainAgent run at random."""
    d = copy.deepcopy(make_captain())
    for _ in range(data.draw(st.integers(1, 4))):
        i = data.draw(st.integers(0, len(d["history"]) - 1))
        what = data.draw(st.sampled_from(["name", "content", "prompt"]))
        if what == "name":
            d["history"][i]["name"] = data.draw(_roles)
        elif what == "content":
            d["history"][i]["content"] = data.draw(_texts)
        else:
            d["system_prompt"][data.draw(_roles)] = data.draw(_texts)
    if data.draw(st.booleans()):
        d[data.draw(st.sampled_from(sorted(d)))] = data.draw(_json)
    _check(d)


@given(st.lists(st.fixed_dictionaries(
    {"agent": _roles, "kind": st.sampled_from(["task", "plan", "ledger", "instruction",
                                                "thought", "output", "tool_output", "stall",
                                                "termination", "other"])},
    optional={"to": _roles, "content": _texts, "ledger": _json, "exitcode": _json,
              "final_answer": _json, "terminates": _json}), min_size=1, max_size=8))
def test_random_jsonl(lines: list[dict[str, Any]]) -> None:
    """Random JSONL event streams import and audit, or fail with a typed error."""
    import json

    text = "\n".join(json.dumps(x) for x in lines)
    try:
        t = parse_jsonl(text, file="f.jsonl")
    except AdapterError as e:
        err: AdapterError | None = e
    else:
        err = None
        audit_trace(t)
    assert err is None or err.file == "f.jsonl"
