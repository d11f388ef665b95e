"""Issue 29, seventh sweep round: only a real yes passes ``check=``.

``Agent.execute(check=...)`` (and the check beside ``approve=``) ran the call when the
comparator returned any truthy value: ``"no"``, ``"False"``, ``1``, ``[0]``, ``0.5``, a
dict, ``object()``, a numpy-like object whose ``==`` gives another object; one whose
``__bool__`` raises ("the truth value of an array ... is ambiguous") left
``Agent.execute`` as a ValueError after the gate authorized the call. Now anything but
``True`` refuses the call ``rejected`` (fail closed) and its truth is never asked.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from icore.workspace import REJECTED, Workspace


class _ArrayLike:
    """numpy-like: truthy, ``==`` broadcasts to another array-like."""

    def __bool__(self) -> bool:
        return True

    def __eq__(self, other: object) -> Any:
        return _ArrayLike()

    __hash__ = object.__hash__


class _Ambiguous:
    def __bool__(self) -> bool:
        raise ValueError("The truth value of an array with more than one element is "
                         "ambiguous")


class _IntSub(int):
    pass


_NOT_YES: list[Any] = ["no", "False", "yes", "", 1, 0.5, [0], {"approved": False},
                       object(), _ArrayLike(), _Ambiguous(), _IntSub(1), None, False]


def _setup() -> tuple[Any, list[str]]:
    ws = Workspace({"k/*": "o"})
    ws.put("k/1", {"v": 1})
    ag = ws.agent("a")
    ag.read("k/1")
    return ag, []


@pytest.mark.parametrize("answer", _NOT_YES, ids=lambda v: type(v).__name__ + repr(v)[:12])
def test_a_check_returning_anything_but_true_refuses(answer: Any) -> None:
    ag, ran = _setup()
    call = ag.execute("t", lambda x: ran.append(x), {"x": "p"}, depends_on={"k/1"},
                      check=lambda r: answer)
    assert not call.executed and call.reason == REJECTED and ran == []
    if answer is not None and answer is not False:
        assert "not True" in call.detail


@pytest.mark.parametrize("answer", _NOT_YES, ids=lambda v: type(v).__name__ + repr(v)[:12])
def test_the_check_beside_a_human_approval_needs_a_real_yes(answer: Any) -> None:
    ag, ran = _setup()
    call = ag.execute("t", lambda x: ran.append(x), {"x": "p"}, depends_on={"k/1"},
                      approve=lambda r: r.approve(), check=lambda r: answer)
    assert not call.executed and ran == []


def test_async_check_and_true_still_approves() -> None:
    ag, ran = _setup()

    async def tool(x: str) -> str:
        ran.append(x)
        return "done"

    refused = asyncio.run(ag.aexecute("t", tool, {"x": "p"}, depends_on={"k/1"},
                                      check=lambda r: "no"))
    assert not refused.executed and ran == []
    ok = asyncio.run(ag.aexecute("t", tool, {"x": "p"}, depends_on={"k/1"},
                                 check=lambda r: True))
    both = ag.execute("t", lambda x: ran.append(x), {"x": "q"}, depends_on={"k/1"},
                      approve=lambda r: r.approve(), check=lambda r: True)
    assert ok.executed and both.executed and ran == ["p", "q"]


@settings(max_examples=60, deadline=None)
@given(st.one_of(st.text(), st.integers(), st.floats(allow_nan=True),
                 st.lists(st.integers(), max_size=3),
                 st.dictionaries(st.text(max_size=3), st.booleans(), max_size=2)))
def test_no_value_but_true_ever_runs_the_call(answer: Any) -> None:
    ag, ran = _setup()
    call = ag.execute("t", lambda x: ran.append(x), {"x": "p"}, depends_on={"k/1"},
                      check=lambda r: answer)
    assert not call.executed and ran == []
