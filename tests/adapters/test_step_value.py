"""``Step`` keeps its rare fields in one shared tuple and behaves as the dataclass it was (#29)."""

from __future__ import annotations

import copy
import dataclasses
import pickle
import sys
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from icore.adapters._trace import Ledger, Step, StepKind
from icore.adapters._trace import _StepFields as _Reference  # the fields as a dataclass

_NAMES = [f.name for f in dataclasses.fields(_Reference)]
_text = st.text(max_size=8)
_opt_text = st.none() | _text
_steps = st.fixed_dictionaries(
    {"index": st.integers(0, 10**15), "agent": _text, "kind": st.sampled_from(list(StepKind)),
     "content": _text},
    optional={"role": _text, "to": _opt_text, "final_answer": _opt_text,
              "terminates": st.booleans(), "exitcode": st.none() | st.integers(-3, 300),
              "parent": st.none() | st.integers(0, 10**6), "calls": _opt_text,
              "plan_id": _opt_text, "pause": st.booleans(), "gate_replan": st.booleans(),
              "ledger": st.none() | st.builds(Ledger, next_speaker=_opt_text)})


@settings(max_examples=200, deadline=None)
@given(_steps, _steps)
def test_step_reads_compares_and_prints_as_the_dataclass(a: dict[str, Any],
                                                         b: dict[str, Any]) -> None:
    s, r = Step(**a), _Reference(**a)
    assert [getattr(s, n) for n in _NAMES] == [getattr(r, n) for n in _NAMES]
    assert repr(s) == repr(r).replace("_StepFields(", "Step(")
    assert (s == Step(**b)) == (r == _Reference(**b))
    assert s == Step(*(getattr(r, n) for n in _NAMES))  # positional, in field order
    if s.ledger is None:  # a ledger holds a dict: neither is hashable then
        assert hash(s) == hash(Step(**a))
    assert pickle.loads(pickle.dumps(s)) == s and copy.deepcopy(s) == s
    changed = dataclasses.replace(s, content="x", to="y")
    assert changed == Step(**{**a, "content": "x", "to": "y"})
    assert dataclasses.asdict(s) == dataclasses.asdict(r)


def test_step_is_frozen_and_small() -> None:
    s = Step(5, "coder", StepKind.OUTPUT, "hi")
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.content = "other"  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        del s.agent
    with pytest.raises(TypeError, match="colour"):
        dataclasses.replace(s, colour="red")
    assert dataclasses.is_dataclass(s) and [f.name for f in dataclasses.fields(s)] == _NAMES
    assert s._rare is None and sys.getsizeof(s) < 100  # the dataclass took 152 bytes
    assert Step.__match_args__ == tuple(_NAMES)
    t1 = Step(6, "terminal", StepKind.TOOL_OUTPUT, "42", exitcode=0)
    t2 = Step(9, "terminal", StepKind.TOOL_OUTPUT, "43", exitcode=0)
    assert t1._rare is t2._rare and t1.exitcode == 0 and not t1.terminates
    assert Step(7, "x", StepKind.TERMINATION, "", terminates=True).terminates is True
