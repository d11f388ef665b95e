"""Invariants of the branch positions a LangGraph read or call is stamped with (#28).

:class:`~icore.integrations.langgraph._branches.Step` decides which reads may back a
call (``counts``): never the call's own turn, never a sibling task's of one step in any
enclosing graph, always an earlier root step's of the same invocation (the checkpoint
line check places those). Pure: positions built by hand, as LangGraph names them.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from icore.integrations.langgraph._branches import Step, _units, branch_of, note_task

pytestmark = pytest.mark.timeout(60)

_UNIT = st.sampled_from(["worker:a", "worker:b", "worker:a|1", "agent:x", "tools:y"])
_CKPT = st.sampled_from(["c1", "c2", "c3"])


def _step(units: list[str], ckpts: list[str], root: int = 1) -> Step:
    """A task at ``units`` whose enclosing graphs run from ``ckpts`` (root first)."""
    cmap = {"|".join(units[:i]): ckpts[i] for i in range(len(units))}
    return Step("t", tuple(sorted(cmap.items())), "|".join(units), root)


_POS = st.integers(1, 3).flatmap(lambda n: st.tuples(
    st.lists(_UNIT, min_size=n, max_size=n), st.lists(_CKPT, min_size=n, max_size=n)))


@settings(max_examples=200, deadline=None)
@given(pos=_POS)
def test_a_step_never_counts_its_own_reads(pos: tuple[list[str], list[str]]) -> None:
    s = _step(*pos)
    assert not s.counts(_step(*pos)) and not s.counts(_step(*pos, root=2))


@settings(max_examples=200, deadline=None)
@given(a=_POS, b=_POS, level=st.integers(0, 2))
def test_sibling_tasks_of_one_step_never_count_each_other(
        a: tuple[list[str], list[str]], b: tuple[list[str], list[str]], level: int) -> None:
    """Same enclosing positions down to ``level``, then different tasks in one step."""
    ua, ca = a
    ub, cb = b
    level = min(level, len(ua) - 1, len(ub) - 1)
    ub = ua[:level] + ub[level:]
    cb = ca[:level + 1] + cb[level + 1:]
    if ua[level] == ub[level]:
        ub[level] = "other:z"
    read, call = _step(ua, ca), _step(ub, cb)
    assert not call.counts(read) and not read.counts(call)
    assert not call.replans(read)


@settings(max_examples=200, deadline=None)
@given(a=_POS, b=_POS)
def test_an_earlier_root_step_of_the_invocation_counts(
        a: tuple[list[str], list[str]], b: tuple[list[str], list[str]]) -> None:
    ua, ca = a
    ub, cb = b
    cb = ["c0", *cb[1:]]  # another root step (the line check places it)
    assert _step(ub, cb).counts(_step(ua, ca))


def test_run_counters_stay_with_their_task() -> None:
    assert _units("worker:a|1|agent:b") == ("worker:a|1", "agent:b")
    assert _units("") == ()
    assert _units("worker:a|agent:b|2|tools:c") == ("worker:a", "agent:b|2", "tools:c")


def test_a_read_outside_any_step_counts_and_other_stamps_by_difference() -> None:
    s = _step(["tools:y"], ["c1"])
    assert s.counts(None) and s.counts(("message", "m1")) and not s.counts(s)


_TASK = st.tuples(st.sampled_from(["worker", "agent", "tools", "fan"]),
                  st.text("0123456789abcdef", min_size=4, max_size=8),
                  st.one_of(st.none(), st.integers(0, 9)),  # a Send index, else a pull
                  st.one_of(st.none(), st.integers(1, 3)))  # a further graph run


@settings(max_examples=200, deadline=None)
@given(tasks=st.lists(_TASK, min_size=1, max_size=4))
def test_a_branch_name_is_the_task_path_with_each_send_index(
        tasks: list[tuple[str, str, int | None, int | None]]) -> None:
    """Every task noted: one label per task, ``node[i]`` for a Send, ``#n`` for a
    further run; no name (None) when no task is a Send and none a further run."""
    units, want = [], []
    for node, tid, index, again in tasks:
        task_ns = "|".join([*units, f"{node}:{tid}"])
        note_task({"langgraph_checkpoint_ns": task_ns, "langgraph_node": node,
                   "langgraph_path": ("__pregel_push", index, False) if index is not None
                   else ("__pregel_pull", node)})
        units.append(f"{node}:{tid}" + (f"|{again}" if again else ""))
        want.append((f"{node}[{index}]" if index is not None else node)
                    + (f"#{again}" if again else ""))
    got = branch_of("|".join(units))
    branched = any(i is not None or a for _, _, i, a in tasks)
    assert got == ("/".join(want) if branched else None)
    assert branch_of("") is None and branch_of(None) is None
