"""The same-answer search of ``human_answers`` is linear, with the results it had (#29).

A thought repeating a human's answer that a task-naming line recorded (same tool,
answer, and arguments when both have them) is linked to the first such answer not yet
used. That search scanned every task-naming answer per thought (quadratic when many
answers name a task); :class:`Twins` indexes them. Checked against the straightforward
scan it replaced, on random answer sequences.
"""

from __future__ import annotations

from collections.abc import Sequence

from hypothesis import given, settings
from hypothesis import strategies as st

from icore.adapters import ActionLineage, HumanAnswer, lineage_of
from icore.adapters._action_lineage import human_answers
from icore.adapters._answer_twins import Twins
from icore.fence import DecisionEntry

_TOOLS = st.sampled_from(["ship", "pay", "mail"])
_ARGS = st.one_of(st.none(), st.sampled_from(['{"a":1}', '{"a":2}', "{}"]))


@st.composite
def _answer(draw: st.DrawFn, task: bool) -> HumanAnswer:
    return HumanAnswer(step=draw(st.integers(0, 50)), tool=draw(_TOOLS),
                       approved=draw(st.booleans()), args=draw(_ARGS),
                       task=f"t{draw(st.integers(0, 30))}" if task else None)


def _reference(exact: Sequence[HumanAnswer], asked: Sequence[HumanAnswer]
               ) -> list[HumanAnswer | None]:
    """The scan ``human_answers`` did before (first match, removed once found)."""
    left = list(exact)
    out: list[HumanAnswer | None] = []
    for ans in asked:
        twin = next((x for x in left if (x.tool, x.approved) == (ans.tool, ans.approved)
                     and (None in (x.args, ans.args) or x.args == ans.args)), None)
        if twin is not None:
            left.remove(twin)
        out.append(twin)
    return out


@settings(max_examples=400, deadline=None)
@given(st.lists(_answer(True), max_size=25), st.lists(_answer(False), max_size=25))
def test_twins_take_what_the_scan_found(exact: list[HumanAnswer],
                                        asked: list[HumanAnswer]) -> None:
    twins = Twins(exact)
    got = [twins.take(a) for a in asked]
    want = _reference(exact, asked)
    assert [id(x) if x is not None else None for x in got] == \
        [id(x) if x is not None else None for x in want]


def _lineage(task: str, tool: str) -> ActionLineage:
    e = DecisionEntry(action=tool, outcome="replan_required", reason="stale", roots=(),
                      deps=(), frontier={}, heads={}, task=task)
    return lineage_of(task, task, [], [e])


def test_many_thoughts_beside_many_task_answers_each_link_to_their_own() -> None:
    """3,000 task-naming answers, then 3,000 thoughts repeating them in reverse order
    (the scan compared each thought with every earlier answer: 4.5 million comparisons):
    each thought is its own task's twin, so every action keeps its task line's step and
    no thought answers another action."""
    n = 3000
    lineages = [_lineage(f"t{i}", "ship") for i in range(n)]
    exact = [HumanAnswer(step=i, tool="ship", approved=True, args=f'{{"i":{i}}}',
                         task=f"t{i}") for i in range(n)]
    thoughts = [HumanAnswer(step=n + i, tool="ship", approved=True,
                            args=f'{{"i":{n - 1 - i}}}') for i in range(n)]
    out = human_answers(lineages, [*exact, *thoughts], [])
    assert [a.human_step for a in out] == list(range(n))
    assert {a.human for a in out} == {"approved"}


class _Tool(str):
    """A tool name that counts how often it is compared (each answer its own object)."""

    compared = 0

    def __eq__(self, other: object) -> bool:
        _Tool.compared += 1
        return str.__eq__(self, other)

    __hash__ = str.__hash__


def test_linking_compares_each_thought_with_a_bounded_number_of_answers() -> None:
    """The work, counted as comparisons of tool names (no clock): the scan compared a
    thought with every unused task-naming answer before its twin (2,000 answers and
    thoughts in reverse: about 2 million); the index a few per answer."""
    n = 2000
    lineages = [_lineage(f"t{i}", "ship") for i in range(n)]
    exact = [HumanAnswer(step=i, tool=_Tool("ship"), approved=True, args=f'{{"i":{i}}}',
                         task=f"t{i}") for i in range(n)]
    thoughts = [HumanAnswer(step=n + i, tool=_Tool("ship"), approved=True,
                            args=f'{{"i":{n - 1 - i}}}') for i in range(n)]
    _Tool.compared = 0
    out = human_answers(lineages, [*exact, *thoughts], [])
    assert [a.human_step for a in out] == list(range(n))
    assert _Tool.compared < 10 * n, _Tool.compared
