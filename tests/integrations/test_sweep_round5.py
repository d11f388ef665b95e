"""Issue 29, fifth sweep round: the framework wrappers and RunRecorder on odd values.

Causes fixed: (1) a tool whose annotations name nothing (``x: 'Nowhere'``, ``-> 'Nope'``,
``x: 'int +'``) raised the framework's NameError / SyntaxError / PydanticUserError from
inside ``fenced_tool``; a type pydantic cannot describe (a plain class) raised
``PydanticSchemaGenerationError`` (Agents SDK, AG2). (2) RunRecorder's refusals formatted
the bad value with ``repr``/``str``: an object whose ``__repr__`` raises, a 5000-deep
list or an int past the 4300-digit limit turned the typed refusal into a traceback, and
such a value in a tool's arguments or result broke ``write``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from icore.adapters import audit_path
from icore.errors import IcoreError, IntegrationError
from icore.integrations import RunRecorder
from icore.integrations.ag2 import fenced_tool as ag2_fenced_tool
from icore.integrations.langgraph import fenced_tool as lg_fenced_tool
from icore.integrations.openai_agents import fenced_function_tool
from icore.workspace import Workspace

WRAPPERS: dict[str, Callable[..., Any]] = {
    "langgraph": lg_fenced_tool, "openai_agents": fenced_function_tool, "ag2": ag2_fenced_tool,
}


def _param_ref(city: Nowhere) -> str:  # type: ignore[name-defined]  # noqa: F821
    """Book."""
    return str(city)


def _return_ref(city: str) -> Nope:  # type: ignore[name-defined]  # noqa: F821
    """Book."""
    return city


def _bad_syntax(city: "int +") -> str:  # type: ignore[valid-type]  # noqa: F722
    """Book."""
    return str(city)


class Opaque:
    """A class pydantic has no schema for (no arbitrary types allowed)."""


def _lock(city: Opaque) -> str:
    """Book."""
    return str(city)


@pytest.mark.parametrize("fw", sorted(WRAPPERS))
@pytest.mark.parametrize("fn", [_param_ref, _return_ref, _bad_syntax],
                         ids=["param", "return", "syntax"])
def test_an_annotation_that_names_nothing_is_refused_when_wrapping(
        fw: str, fn: Callable[..., Any]) -> None:
    ws = Workspace({"k/*": "o"})
    if fw == "ag2" and fn is _return_ref:  # AG2 reads the parameters only: it wraps
        WRAPPERS[fw](fn, depends_on={"k/1"}, agent=ws.agent("a"))
        return
    with pytest.raises(IntegrationError, match="annotations") as ei:
        WRAPPERS[fw](fn, depends_on={"k/1"}, agent=ws.agent("a"))
    assert ei.value.fields["tool"] == fn.__name__ and ei.value.fields["framework"] == fw


@pytest.mark.parametrize("fw", ["openai_agents", "ag2"])
def test_a_type_without_a_schema_is_refused_when_wrapping(fw: str) -> None:
    ws = Workspace({"k/*": "o"})
    with pytest.raises(IntegrationError, match="schema") as ei:
        WRAPPERS[fw](_lock, depends_on={"k/1"}, agent=ws.agent("a"))
    assert ei.value.fields["tool"] == "_lock"


class _Weird:
    def __repr__(self) -> str:
        raise RuntimeError("repr")

    __str__ = __repr__

    def __hash__(self) -> int:
        return 1


def _deep(n: int) -> list[Any]:
    x: list[Any] = []
    for _ in range(n):
        x = [x]
    return x


ODD: dict[str, Any] = {"weird": _Weird(), "deep": _deep(5000), "huge": 10**5000,
                       "nan": float("nan"), "bytes": b"\xff", "set": {1, 2}}
CALLS: dict[str, Callable[[RunRecorder, Any], Any]] = {
    "add.kind": lambda r, v: r.add("a", v, "x"),
    "add.agent": lambda r, v: r.add(v, "thought", "x"),
    "add.at": lambda r, v: r.add("a", "thought", "x", at=v),
    "add.field": lambda r, v: r.add("a", "thought", "x", extra=v),
    "tool.tool": lambda r, v: r.tool_call("a", v, {"x": 1}, 1),
    "tool.args": lambda r, v: r.tool_call("a", "t", {"x": v}, 1),
    "tool.result": lambda r, v: r.tool_call("a", "t", {"x": 1}, v),
    "tool.at": lambda r, v: r.tool_call("a", "t", {"x": 1}, 1, at=v),
    "ctor.question": lambda r, v: RunRecorder("r", question=v),
    "ctor.agents": lambda r, v: RunRecorder("r", agents={"a": v}),
    "ctor.succeeded": lambda r, v: RunRecorder("r", succeeded=v),
}


def _record_and_audit(tmp_path: Path, call: Callable[[RunRecorder, Any], Any],
                      value: Any) -> None:
    """``call`` refuses typed, or the run writes and audits."""
    r = RunRecorder("r")
    r.add("u", "task", "q")
    refused: IntegrationError | None = None
    try:
        call(r, value)
    except IntegrationError as exc:
        refused = exc
    if refused is not None:
        assert str(refused) and refused.fields.get("argument")  # str() never raises
        return
    p = r.write(tmp_path / "run.jsonl", overwrite=True)
    for line in p.read_text(encoding="utf-8").splitlines():
        json.loads(line)
    try:
        audit_path(p)
    except IcoreError:
        pass


@pytest.mark.parametrize("value", sorted(ODD))
@pytest.mark.parametrize("call", sorted(CALLS))
def test_recorder_refuses_or_records_odd_values(tmp_path: Path, call: str,
                                                value: str) -> None:
    _record_and_audit(tmp_path, CALLS[call], ODD[value])


def _odd(name: str) -> Any:
    """One of :data:`ODD` (hypothesis shows the name, not the value's repr)."""
    return ODD[name]


_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text() | st.binary()
    | st.sampled_from(sorted(ODD)).map(_odd),
    lambda kids: st.lists(kids, max_size=3) | st.dictionaries(st.text(max_size=3), kids,
                                                              max_size=3)
    | st.sets(st.integers(), max_size=3), max_leaves=12)


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture,
                                 HealthCheck.too_slow])
@given(call=st.sampled_from(sorted(CALLS)), value=_VALUES)
def test_recorder_fuzz_typed_error_or_an_auditable_run(tmp_path: Path, call: str,
                                                       value: Any) -> None:
    """Structural: any value at any argument: a typed refusal or a run that audits."""
    _record_and_audit(tmp_path, CALLS[call], value)
