"""The one bounded attempt ledger of the integrations (``_call_ledger.CallLedger``, #28).

The Agents SDK (a saved run resumed twice), LangGraph (``StepMemory``: re-runs of a
step, with an event per attempt still running) and CrewAI (retries after an unknown
outcome) keep a call's first attempt in it. For any interleaving of first attempts,
their ends (ran, refused, raised with outcome unknown, forgotten) and evictions by newer
calls over a small capacity: a held call whose first attempt ran, or is unknown, is never
runnable again and keeps its answer; capacity is never exceeded; StepMemory's running
event is set exactly when its attempt is no longer running there. CrewAI's use:
test_crewai_qa10b.py (its own venv).
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Hashable
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from langchain_core.tools import ToolException

from icore.integrations import NoEffect
from icore.integrations._call_ledger import (
    RAN,
    REFUSED,
    STARTED,
    UNKNOWN,
    CallLedger,
    Earlier,
)
from icore.integrations.langgraph._replays import MAX_STEPS, EarlierUnknown, StepMemory

pytestmark = pytest.mark.timeout(60)

KEYS = st.integers(0, 6)
OPS = st.lists(st.one_of(
    st.tuples(st.just("start"), KEYS),
    st.tuples(st.sampled_from([RAN, REFUSED, UNKNOWN]), KEYS, st.integers(0, 9)),
    st.tuples(st.just("forget"), KEYS),
    st.tuples(st.just("evict"), st.integers(1, 4)),
), max_size=60)


@given(keep=st.integers(1, 5), ops=OPS, stepmem=st.booleans())
def test_ran_or_unknown_never_runnable_again_while_held(keep: int, ops: list[Any],
                                                         stepmem: bool) -> None:
    led = StepMemory("book", keep) if stepmem else CallLedger(keep)
    owned: dict[Hashable, threading.Event | None] = {}  # first attempts running here
    pushed: dict[Hashable, threading.Event | None] = {}  # ... the oldest, forgotten
    ended: dict[Hashable, Earlier] = {}  # first attempts that ran or are unknown
    fresh = itertools.count(100)  # keys outside KEYS: newer calls that evict older ones
    handed: list[tuple[Hashable, threading.Event]] = []
    for op in ops:
        if op[0] == "start":
            k = op[1]
            before = led.earlier(k)
            got = led.begin(k)
            assert got == before  # held: its first attempt's answer; else None (runnable)
            if got is None:
                assert led.earlier(k) == Earlier(STARTED)
                owned[k] = led.running(k) if isinstance(led, StepMemory) else None
                pushed.pop(k, None)  # a second first attempt: the first's end not modelled
            elif k in ended:
                assert got == ended[k] and got.how in (RAN, UNKNOWN)
        elif op[0] == "evict":
            for _ in range(op[1]):
                assert led.begin(next(fresh)) is None
        elif op[1] in owned or op[1] in pushed:  # only the attempt that began it settles
            k = op[1]
            ev = owned.pop(k) if k in owned else pushed.pop(k)
            if op[0] == "forget":
                led.settle(k, None)
                assert led.earlier(k) is None
            else:
                led.settle(k, op[0], op[2])
                assert led.earlier(k) == Earlier(op[0], op[2])
                if op[0] in (RAN, UNKNOWN):
                    ended[k] = Earlier(op[0], op[2])
            if ev is not None:
                handed.append((k, ev))
        assert len(led) <= keep
        for k in list(ended):  # ran / unknown: unchanged until forgotten as the oldest
            now = led.earlier(k)
            if now is None:
                del ended[k]
            else:
                assert now == ended[k]
        for k in list(owned):  # pushed out while running: its end is held again
            if led.earlier(k) is None:
                ev = pushed[k] = owned.pop(k)
                if ev is not None:
                    handed.append((k, ev))
        if isinstance(led, StepMemory):
            for k, ev in owned.items():  # running here: its waiters still wait
                assert ev is not None and not ev.is_set() and led.running(k) is ev
            for _, ev in handed:  # settled or forgotten: every waiter released
                assert ev.is_set()


def test_bad_input_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="keep must be >= 1"):
        CallLedger(0)
    with pytest.raises(ValueError, match="how must be"):
        CallLedger().settle("k", "failed")
    led = CallLedger()
    assert led.begin(None) is None and led.begin(None) is None  # no identity: not held
    led.settle(None, RAN, 1)
    assert len(led) == 0 and led.earlier(None) is None


def test_settled_after_being_pushed_out_is_held_again_within_capacity() -> None:
    led = CallLedger(2)
    assert led.begin("a") is None
    assert led.begin("b") is None and led.begin("c") is None  # "a" forgotten, running
    led.settle("a", RAN, "done")  # it ran: held again, as the newest
    assert led.begin("a") == Earlier(RAN, "done")
    assert len(led) == 2 and led.earlier("b") is None


def test_step_memory_answers_from_the_shared_ledger() -> None:
    mem = StepMemory("book")
    assert mem.begin(None) is None and mem.running(None) is None
    assert mem.begin("s") is None
    ev = mem.running("s")
    assert ev is not None and not ev.is_set()
    with pytest.raises(EarlierUnknown, match="already started"):
        mem.answer(mem.begin("s"))  # type: ignore[arg-type]
    mem.raised("s", TimeoutError("slow"), started=True)
    assert ev.is_set() and mem.running("s") is None
    with pytest.raises(EarlierUnknown, match=r"earlier_outcome_unknown.*TimeoutError: slow"):
        mem.answer(mem.begin("s"))  # type: ignore[arg-type]
    assert mem.begin("t") is None
    mem.raised("t", NoEffect("nothing done"), started=True)  # a refusal, kept as such
    with pytest.raises(ToolException, match="nothing done") as got:
        mem.answer(mem.begin("t"))  # type: ignore[arg-type]
    assert not isinstance(got.value, EarlierUnknown)
    assert mem.begin("u") is None
    mem.raised("u", RuntimeError("setup"), started=False)  # nothing ran: forgotten
    assert mem.earlier("u") is None
    assert mem.begin("v") is None
    mem.settle("v", RAN, {"ok": 1})
    assert mem.answer(mem.begin("v")) == {"ok": 1}  # type: ignore[arg-type]
    assert mem._keep == MAX_STEPS
