"""Generic JSONL: merged agent spellings are said, malformed ``tool_calls`` refused (QA qa-new15c).

A researcher's trace whose steps speak as ``coder_1``, ``coder1`` and ``Coder_1`` (three
workers, they meant) was read as one agent with no word: owner counts were wrong. The
folding stays (a trace spelling one agent two ways is common) but each merge is a
warning naming the spellings. ``tool_calls`` of a wrong shape were read silently though
they decide whether an output repeats an earlier one; they are a typed error now, and a
malformed line names its column.
"""

from __future__ import annotations

import json

import pytest

from icore.adapters import AdapterError, parse_jsonl

HEAD = {"run": {"id": "r", "question": "q", "agents": {"coder_1": "codes"}}}


def _text(*steps: dict) -> str:
    return "\n".join(json.dumps(x) for x in (HEAD, *steps)) + "\n"


def test_spellings_read_as_one_agent_are_named() -> None:
    t = parse_jsonl(_text({"agent": "user", "kind": "task", "content": "go"},
                          {"agent": "coder_1", "kind": "output", "content": "a"},
                          {"agent": "coder1", "kind": "output", "content": "b"},
                          {"agent": "Coder_1", "kind": "output", "content": "c"},
                          {"agent": "wri\u200bter", "kind": "output", "content": "d"}),
                    file="t.jsonl")
    assert {s.agent for s in t.steps} == {"user", "coder_1", "wri\u200bter"}
    said = [w for w in t.warnings if "were read as the agent" in w]
    assert said == ["t.jsonl: agent names 'coder1', 'Coder_1' were read as the agent "
                    "'coder_1' (names are compared without case, punctuation and invisible "
                    "characters); give distinct agents distinct names"]


def test_one_spelling_per_agent_warns_nothing() -> None:
    t = parse_jsonl(_text({"agent": "user", "kind": "task", "content": "go"},
                          {"agent": "coder_1", "kind": "output", "content": "a"},
                          {"agent": "lead", "kind": "instruction", "to": "coder_1"}))
    assert not [w for w in t.warnings if "were read as the agent" in w]


@pytest.mark.parametrize(("calls", "field", "says"), [
    ("search", "line 3.tool_calls", "must be a list"),
    ([5], "line 3.tool_calls[0]", "must be an object"),
    ([{"nme": "search", "args": 5}], "line 3.tool_calls[0].name", "keys: args, nme"),
    ([{"name": "", "args": {}}], "line 3.tool_calls[0].name", "non-empty string name"),
    ([{"name": "a"}, {"name": "b", "id": {"x": 1}}], "line 3.tool_calls[1].id", "id must"),
])
def test_malformed_tool_calls_are_refused(calls: object, field: str, says: str) -> None:
    with pytest.raises(AdapterError) as e:
        parse_jsonl(_text({"agent": "user", "kind": "task", "content": "go"},
                          {"agent": "coder_1", "kind": "output", "content": "x",
                           "tool_calls": calls}))
    assert e.value.field == field and says in e.value.problem


def test_wellformed_tool_calls_read_any_json_args() -> None:
    """A model may send non-object arguments (an Agents SDK recording keeps them)."""
    t = parse_jsonl(_text({"agent": "user", "kind": "task", "content": "go"},
                          {"agent": "coder_1", "kind": "output", "content": "x",
                           "tool_calls": [{"name": "a", "args": 5, "id": 7},
                                          {"name": "b", "args": "{}", "id": None},
                                          {"name": "c"}]},
                          {"agent": "coder_1", "kind": "output", "content": "y",
                           "tool_calls": []}))
    assert len(t.steps) == 3


def test_a_malformed_line_names_its_column() -> None:
    bad = _text({"agent": "user", "kind": "task", "content": "go"}) + \
        '{"agent": "coder_1", "kind": "output", "content": "x"\n'
    with pytest.raises(AdapterError) as e:
        parse_jsonl(bad)
    assert e.value.field == "line 3.content"
    assert e.value.problem == ("malformed JSON at column 54 (after this field): "
                               "Expecting ',' delimiter")
