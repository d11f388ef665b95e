"""Issue 29: Fence.execute/aexecute refuse wrong argument types at the call with a typed
FenceCallError naming the argument; nothing is asked or executed."""

from __future__ import annotations

import asyncio
import functools
from typing import Any

import pytest

from icore.errors import FenceCallError, FenceError
from icore.fence import ProtectedTool

from .test_fence_api import Trip, _booker


def _plain(destination: str) -> str:
    return destination


@pytest.mark.parametrize(("kw", "argument"), [
    ({"tool": _plain}, "tool"),
    ({"tool": None}, "tool"),
    ({"tool": functools.partial(_plain)}, "tool"),
    ({"roots": None}, "roots"),
    ({"roots": "ROOT"}, "roots"),
    ({"roots": [{}]}, "roots[0]"),
    ({"roots": ["ROOT", 7]}, "roots[1]"),
    ({"roots": {"ROOT"}}, "roots"),
    ({"args": ["Porto"]}, "args"),
    ({"args": None}, "args"),
    ({"args": {1: "Porto"}}, "args"),
    ({"replan": "not callable"}, "replan"),
])
@pytest.mark.parametrize("mode", ["sync", "async"])
def test_wrong_types_are_refused_at_the_call(kw: dict[str, Any], argument: str,
                                             mode: str) -> None:
    trip = Trip()
    booked: list[str] = []
    rec = trip.act(trip.req, {"destination": "Porto"})
    call: dict[str, Any] = {"tool": _booker(booked), "roots": [rec.id],
                            "args": {"destination": "Porto"}}
    call.update({k: (rec.id if v == "ROOT" else v) for k, v in kw.items()})
    if isinstance(call["roots"], list):
        call["roots"] = [rec.id if r == "ROOT" else r for r in call["roots"]]
    tool = call.pop("tool")
    fence = trip.fence()
    def run() -> Any:
        if mode == "sync":
            return fence.execute(tool, **call)
        return asyncio.run(fence.aexecute(tool, **call))

    with pytest.raises(FenceCallError) as e:
        run()
    assert e.value.fields["argument"] == argument and isinstance(e.value, FenceError)
    assert isinstance(e.value, TypeError) and booked == []
    if argument == "roots" and kw["roots"] == "ROOT":
        assert "roots=[rid]" in str(e.value)


def test_a_tuple_of_roots_still_runs() -> None:
    trip = Trip()
    booked: list[str] = []
    rec = trip.act(trip.req, {"destination": "Porto"})
    res = trip.fence().execute(_booker(booked), roots=(rec.id,), args={"destination": "Porto"})
    assert res.executed and booked == ["Porto"]
    assert isinstance(_booker(booked), ProtectedTool)
