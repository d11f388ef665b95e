"""Issue 29, sixth sweep round: a protected call's arguments are read once and checked.

``Agent.execute`` read a caller's mapping several times (its reads could raise out of
the gate as the mapping's own RuntimeError, or answer otherwise each time), and checked
the arguments against the tool's parameters only for plain functions: a callable object
or a ``functools.partial`` given an argument it has no parameter for ran into Python's
TypeError once authorized, instead of a ``WorkspaceError`` before anything was asked.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Iterator, Mapping
from typing import Any

import pytest

from icore.workspace import Workspace, WorkspaceError


def _agent() -> Any:
    ws = Workspace({"k/*": "o"})
    ws.put("k/1", {"v": 1})
    ag = ws.agent("a")
    ag.read("k/1")
    return ag


class _Raising(Mapping[str, Any]):
    def __getitem__(self, key: str) -> Any:
        raise RuntimeError("getitem")

    def __iter__(self) -> Iterator[str]:
        return iter(["x"])

    def __len__(self) -> int:
        return 1


class _Shifty(Mapping[str, Any]):
    """Answers 'Porto' to the first read of ``x``, 'Lisbon' after."""

    def __init__(self) -> None:
        self.reads = 0

    def __getitem__(self, key: str) -> Any:
        self.reads += 1
        return "Porto" if self.reads == 1 else "Lisbon"

    def __iter__(self) -> Iterator[str]:
        return iter(["x"])

    def __len__(self) -> int:
        return 1


def test_a_mapping_that_raises_when_read_is_a_workspace_error() -> None:
    ran: list[Any] = []
    with pytest.raises(WorkspaceError, match="args could not be read"):
        _agent().execute("t", lambda **kw: ran.append(kw), _Raising(), depends_on={"k/1"})
    assert ran == []


@pytest.mark.parametrize("use_async", [False, True])
def test_the_arguments_are_read_once_and_the_approved_ones_run(use_async: bool) -> None:
    ran: list[str] = []
    approved: list[Any] = []

    def ship(x: str) -> str:
        ran.append(x)
        return x

    async def aship(x: str) -> str:
        return ship(x)

    def approve(req: Any) -> Any:
        approved.append(req.args["x"])
        return req.approve()

    args = _Shifty()
    ag = _agent()
    if use_async:
        call = asyncio.run(ag.aexecute("t", aship, args, depends_on={"k/1"}, approve=approve))
    else:
        call = ag.execute("t", ship, args, depends_on={"k/1"}, approve=approve)
    assert args.reads == 1
    assert call.executed and ran == approved == ["Porto"] and call.args == {"x": "Porto"}


class _Tool:
    def __call__(self, x: str) -> str:
        return x


def _two(x: str, y: int) -> str:
    return x


@pytest.mark.parametrize("fn", [_Tool(), functools.partial(_two, y=1)],
                         ids=["callable-object", "partial"])
@pytest.mark.parametrize("args", [{"x": "a", "": 1}, {"x": "a", "z": 1}, {}])
def test_a_callable_object_or_partial_is_checked_against_its_signature(
        fn: Any, args: dict[str, Any]) -> None:
    with pytest.raises(WorkspaceError, match="do not fit the tool function"):
        _agent().execute("t", fn, args, depends_on={"k/1"})


@pytest.mark.parametrize("fn", [_Tool(), functools.partial(_two, y=1),
                                functools.partial(lambda **kw: kw["x"])],
                         ids=["callable-object", "partial", "partial-kwargs"])
def test_a_callable_object_or_partial_that_fits_runs(fn: Any) -> None:
    call = _agent().execute("t", fn, {"x": "a"}, depends_on={"k/1"})
    assert call.executed and call.value == "a"
