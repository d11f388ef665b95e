"""CrewAI: approvals validated after the human, setup mistakes to the app (#28 D3, D4, D7,
D10). A real ``Crew`` with the scripted native-tool-call LLM of test_crewai_turns.py; no
network. Runs in ``.venv-crewai`` (see test_crewai.py).
"""

from __future__ import annotations

import importlib.util
import json
import logging
from typing import Any

import pytest

if importlib.util.find_spec("crewai") is None:
    pytest.skip("icore[crewai] runs in .venv-crewai", allow_module_level=True)
pytest.importorskip("crewai", reason="icore[crewai] runs in .venv-crewai")

from crewai import Agent, Crew, Task
from crewai.hooks import (
    ToolCallHookContext,
    clear_all_global_hooks,
    register_before_tool_call_hook,
    unregister_before_tool_call_hook,
)
from crewai.hooks.dispatch import HookAborted
from crewai.tools import BaseTool, tool
from pydantic import BaseModel

from icore.errors import ActionBlocked, IntegrationError
from icore.integrations.crewai import (
    CrewActionBlocked,
    CrewSetupError,
    fenced_crewai_tool,
    install_hooks,
)
from icore.workspace import ApprovalRequest, Workspace, WorkspaceError

from .test_crewai_turns import Scripted, call, scripted, then

CASE = "case/C1"


class Desk:
    """The QA refund desk: cases owned by ``support``; the desk reads and refunds."""

    def __init__(self, **wrap: Any) -> None:
        self.ws = Workspace({"case/*": "support"})
        self.ws.put(CASE, {"amount": 40}, by="support")
        self.desk = self.ws.agent("refunds")
        self.paid: list[tuple[str, int]] = []
        desk, paid = self.desk, self.paid

        @tool("get_case")
        def get_case(case: str) -> str:
            """Read a refund case."""
            return json.dumps(desk.read(f"case/{case}"))

        @tool("refund")
        def refund(case: str, amount: int) -> str:
            """Refund an amount on a case."""
            paid.append((case, amount))
            return f"refunded {amount} on {case}"

        self.raw = refund
        self.tools = [get_case, fenced_crewai_tool(
            refund, agent=desk, **{"depends_on": lambda a: {f"case/{a['case']}"}, **wrap})]

    def raise_to(self, amount: int) -> None:
        self.ws.put(CASE, {"amount": amount}, by="support")

    def crew(self, llm: Scripted) -> Crew:
        a = Agent(role="refunds", goal="refund cases", backstory="support",
                  tools=self.tools, llm=llm, max_iter=8)
        return Crew(agents=[a], tasks=[Task(description="refund C1", expected_output="done",
                                            agent=a)])


def _replan(amount: int) -> Any:
    return [call("refund", case="C1", amount=amount)]


def test_approve_is_validated_after_the_human_answers() -> None:
    """D3, the reporter's scenario with ``approve=``: the human approves 40 at v1 while
    support raises the case to 400; the gate validates after the answer, so 40 never
    runs; the model gets 400 and its replan is put to the human again, then paid."""
    asked: list[ApprovalRequest] = []
    d: Desk

    def human(req: ApprovalRequest) -> bool:
        asked.append(req)
        if len(asked) == 1:
            d.raise_to(400)  # while the human decides
        return True

    d = Desk(approve=human)
    llm = scripted([[call("get_case", case="C1")], _replan(40), _replan(400), "done"])
    d.crew(llm).kickoff()
    assert d.paid == [("C1", 400)]
    assert [dict(r.args) for r in asked] == [{"case": "C1", "amount": 40},
                                             {"case": "C1", "amount": 400}]
    assert asked[0].basis != asked[1].basis  # bound to the versions: v1, then v2
    seen = " ".join(llm.tool_results())
    assert "(stale)" in seen and '"amount": 400' in seen


def test_a_rejection_runs_nothing_and_a_stale_call_is_never_put_to_the_human() -> None:
    """The human says no: refused ``approval_rejected``. A call already stale when made
    is refused before anyone is asked."""
    asked: list[ApprovalRequest] = []

    def human(req: ApprovalRequest) -> str:
        asked.append(req)
        return "no"

    d = Desk(approve=human)
    llm = scripted([[call("get_case", case="C1")], then(lambda: d.raise_to(50), _replan(40)),
                    _replan(50), "done"])
    d.crew(llm).kickoff()
    assert d.paid == [] and [r.args["amount"] for r in asked] == [50]
    assert "(approval_rejected)" in " ".join(llm.tool_results())


def test_a_before_tool_call_hook_asks_before_the_gate() -> None:
    """D9: CrewAI's own approval place, a ``before_tool_call`` hook, runs before the
    fenced tool: the gate validates after the human answered (mode H of the report)."""
    d = Desk()
    asked: list[int] = []

    def approval(ctx: ToolCallHookContext) -> bool | None:
        if ctx.tool_name != "refund":
            return None
        asked.append(int(ctx.tool_input["amount"]))
        if len(asked) == 1:
            d.raise_to(400)
        return None  # approved

    register_before_tool_call_hook(approval)
    try:
        d.crew(scripted([[call("get_case", case="C1")], _replan(40), _replan(400),
                         "done"])).kickoff()
    finally:
        unregister_before_tool_call_hook(approval)
    assert asked == [40, 400] and d.paid == [("C1", 400)]


def test_on_block_raise_reaches_the_app() -> None:
    """D10: ``on_block="raise"`` leaves ``kickoff()`` as ``CrewActionBlocked`` (an
    ``ActionBlocked`` CrewAI lets through as its ``HookAborted``); nothing ran."""
    d = Desk(on_block="raise")
    llm = scripted([[call("get_case", case="C1")], then(lambda: d.raise_to(400), _replan(40)),
                    "done"])
    with pytest.raises(CrewActionBlocked) as got:
        d.crew(llm).kickoff()
    assert isinstance(got.value, ActionBlocked) and isinstance(got.value, HookAborted)
    assert got.value.fields["reason"] == "stale" and d.paid == []


class _Pax(BaseModel):
    pax: str
    flight: str


class _Loose(BaseTool):
    name: str = "rebook"
    description: str = "Rebook a passenger."

    def _run(self, **kwargs: Any) -> str:
        return f"ran {sorted(kwargs.items())}"


class _Schema(_Loose):
    args_schema: type[BaseModel] = _Pax


def test_kwargs_basetool_refused_unless_its_schema_names_the_arguments() -> None:
    """D4: ``_run(self, **kwargs)`` without schema fields would run with ``{}``: refused
    when wrapped. With an ``args_schema`` naming the fields it runs with them. A fenced
    tool is not fenced again."""
    ws = Workspace({"offer/*": "ops"})
    ws.put("offer/P7", {"flight": "LH402"}, by="ops")
    desk = ws.agent("desk")
    with pytest.raises(IntegrationError, match="named arguments") as got:
        fenced_crewai_tool(_Loose(), agent=desk, depends_on={"offer/P7"})
    assert got.value.fields["parameters"] == ["kwargs"] and "fix" in got.value.fields
    ok = fenced_crewai_tool(_Schema(), agent=desk, depends_on={"offer/P7"})
    desk.read("offer/P7")
    assert ok.run(pax="P7", flight="LH404") == "ran [('flight', 'LH404'), ('pax', 'P7')]"
    with pytest.raises(IntegrationError, match="fenced already"):
        fenced_crewai_tool(ok, agent=desk, depends_on={"offer/P7"})


def _offers() -> Any:
    ws = Workspace({"offer/*": "ops", "pax/*": "ops"})
    ws.put("offer/P7", {"flight": "LH402"}, by="ops")
    return ws, ws.agent("desk")


@tool("rebook")
def _rebook(pax: str, flight: str) -> str:
    """Rebook a passenger."""
    return "rebooked"


@pytest.mark.parametrize(("scope", "match", "fix"), [
    (lambda a: {f"ofer/{a['pax']}"}, "no owner is declared", "offer/"),
    (lambda a: {f"offer/{a['passenger']}"}, "does not have", "flight, pax"),
    (lambda a: f"offer/{a['pax']}", "returned a str", "return a set"),
    (lambda a: 7, "collection of keys", "order/"),
    (lambda a: {("offer", a["pax"])}, "not str", "str keys"),
    (lambda a: {"ofer/P7"}, "no owner is declared", "offer/"),
], ids=["typo_prefix", "wrong_argument", "str", "not_a_collection", "tuple_key",
        "constant_typo"])
def test_depends_on_function_mistakes_raise_when_wrapped(scope: Any, match: str,
                                                         fix: str) -> None:
    """D7: the function is probed once on placeholder arguments; mistakes that cannot
    depend on the values are typed errors naming the fix, before any model call."""
    _ws, desk = _offers()
    with pytest.raises(IntegrationError, match=match) as got:
        fenced_crewai_tool(_rebook, agent=desk, depends_on=scope)
    assert fix in str(got.value.fields.get("fix"))


@pytest.mark.parametrize("scope", [
    lambda a: {f"{a['pax'][:3]}/x"} if a["pax"] != a["pax"] else {f"offer/{a['pax']}"},
    lambda a: {f"offer/{['P7', 'P8'][int(a['flight'][-1]) % 2]}"},
    lambda a: {f"{'offer' if a['pax'] else 'pax'}/{a['pax']}"},
], ids=["value_dependent", "fails_on_placeholder", "prefix_from_values"])
def test_depends_on_that_needs_real_values_is_accepted_when_wrapped(scope: Any) -> None:
    """What depends on the values is left to the call (no false alarm when wrapped)."""
    _ws, desk = _offers()
    fenced_crewai_tool(_rebook, agent=desk, depends_on=scope)


def test_a_depends_on_mistake_at_the_call_reaches_the_app_not_the_model() -> None:
    """D7: a D(a) function that fails on the real arguments (or returns no key) raises
    ``CrewSetupError`` out of ``kickoff()``, caused by the ``WorkspaceError``; the model
    is never asked again and never reads the fix; nothing ran."""
    d = Desk(depends_on=lambda a: {f"case/{a['case']}"} if a["amount"] < 100 else set())
    llm = scripted([[call("get_case", case="C1")], _replan(400), "done"])
    with pytest.raises(CrewSetupError) as got:
        d.crew(llm).kickoff()
    assert isinstance(got.value.__cause__, WorkspaceError) and "empty" in str(got.value)
    assert d.paid == [] and len(llm._seen) == 2  # no model call after the refusal


def test_agents_built_before_the_hooks_fail_closed_with_the_fix(
        caplog: pytest.LogCaptureFixture) -> None:
    """An executor built while icore's model-call hook was not installed cannot tell a
    call's model message: the call does not run and ``CrewSetupError`` names the fix.
    With every CrewAI hook cleared the error still leaves ``kickoff()`` (the fenced call
    puts icore's hooks back, logged at WARNING), and the next crew works without the
    app calling ``install_hooks()``."""
    from crewai.hooks import clear_before_llm_call_hooks

    d = Desk()
    llm = scripted([[call("get_case", case="C1")], _replan(40), "done"])
    try:
        clear_before_llm_call_hooks()
        crew = d.crew(llm)  # its executor copies the (now empty) model-call hooks
        with pytest.raises(CrewSetupError, match="model message") as got:
            crew.kickoff()
        assert "install_hooks" in str(got.value.fields["fix"]) and d.paid == []
        clear_all_global_hooks()
        llm2 = scripted([[call("get_case", case="C1")], _replan(40), "done"])
        with caplog.at_level(logging.WARNING, logger="icore.integrations.crewai"), \
                pytest.raises(CrewSetupError, match="model message"):
            d.crew(llm2).kickoff()
        assert d.paid == []
        assert any("were put back" in r.getMessage() for r in caplog.records)
    finally:
        install_hooks()
    d2 = Desk()
    d2.crew(scripted([[call("get_case", case="C1")], _replan(40), "done"])).kickoff()
    assert d2.paid == [("C1", 40)]
