"""CrewAI seam leftovers of issue 28: D(a) asked once per call, a hierarchical crew's
delegation recorded as a handoff, and the fence's hooks across kickoffs and crews.

A real ``Crew`` with the scripted LLM of test_crewai_turns.py (no network). Runs in
``.venv-crewai`` (see test_crewai.py).
"""

from __future__ import annotations

import importlib.util
from typing import Any

import pytest

if importlib.util.find_spec("crewai") is None:
    pytest.skip("icore[crewai] runs in .venv-crewai", allow_module_level=True)
pytest.importorskip("crewai", reason="icore[crewai] runs in .venv-crewai")

from .test_crewai_setup import Desk
from .test_crewai_turns import call, scripted


def _counting() -> tuple[list[dict[str, Any]], Any]:
    seen: list[dict[str, Any]] = []

    def scope(a: dict[str, Any]) -> set[str]:
        seen.append(dict(a))
        return {f"case/{a['case']}"}

    return seen, scope


@pytest.mark.parametrize("approve", [False, True], ids=["plain", "human"])
def test_a_depends_on_function_is_called_once_per_call(approve: bool) -> None:
    """The guard's check, the action record and the gate (and, with ``approve=``, the
    validation after the human's answer) share one answer: one call per call."""
    seen, scope = _counting()
    d = Desk(depends_on=scope, **({"approve": lambda req: True} if approve else {}))
    seen.clear()  # the wrap-time probe (placeholder arguments) is not a call
    d.crew(scripted([[call("get_case", case="C1")],
                     [call("refund", case="C1", amount=40)], "done"])).kickoff()
    assert d.paid == [("C1", 40)]
    assert seen == [{"case": "C1", "amount": 40}]


def test_a_depends_on_function_is_asked_again_for_a_replans_other_arguments() -> None:
    """A user replanner's arguments are another call's: D(a) is asked for them too
    (once each), never answered from the first arguments."""
    seen, scope = _counting()
    d = Desk(depends_on=scope, replan=lambda st: {**st.args, "amount": 400})

    def changed(_m: Any) -> Any:
        d.raise_to(400)
        return [call("refund", case="C1", amount=40)]

    seen.clear()
    d.crew(scripted([[call("get_case", case="C1")], changed, "done"])).kickoff()
    assert d.paid == [("C1", 400)]
    assert seen == [{"case": "C1", "amount": 40}, {"case": "C1", "amount": 400}]

