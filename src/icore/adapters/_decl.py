"""Declaration packages D for imported runs (icore Sec. 3; design.md 4.1).

One package per source family, sharing one vocabulary so that every imported run is
audited the same way (docs/audit-real-runs.md, "Declaration packages"):

- O_D: ``task``, ``plan``, ``output``, ``tool_output`` (artifacts); ``ledger``,
  ``instruction``, ``thought``, ``stall``, ``termination`` (actions).
- M_D: the run's agents; capabilities from their declared descriptions (Magentic-One team
  block, CaptainAgent ``system_prompt``) via :func:`~icore.adapters.capabilities`;
  ``human`` poses the task (role ``task``); Magentic-One's ``Orchestrator`` is
  ``assigner`` and ``planner``; code-running terminals have role ``tool`` and only the
  ``code`` capability.
- Ω: ``pose_task``, ``plan``, ``replan`` (removes by transport), ``assign`` (assigner),
  ``self_assign`` (CaptainAgent: experts take the turn the unrecorded chat manager gives
  them), ``submit`` (requires an ``output_evidence`` certificate), ``ledger_update``
  (requires ``ledger_evidence``), ``terminate`` (requires ``answer_check``).
- V: ``output_evidence``, ``ledger_evidence``, ``answer_check`` (see
  :mod:`icore.adapters._evidence`).
- I_D: the built-ins (declared capability value, declared weight, priority routing with
  the current assignee first); ε = 0.1, patience H = 3 (Magentic-One's stall limit),
  τ = 0.5.
"""

from __future__ import annotations

from collections.abc import Mapping

from icore.adapters._evidence import capabilities, check_answer, check_ledger, check_output
from icore.adapters._trace_values import (
    name_key,
)
from icore.state import (
    AgentDecl,
    AssertionKind,
    DeclarationPackage,
    EffectTemplate,
    ObservableType,
    OperationDecl,
    Parameters,
    Preconditions,
    ValidatorSpec,
)

HUMAN = "human"
"""The agent that poses the task (role ``task``) in every imported run."""

OTEL_IMPORT = "icore/otel-import"
"""Name of the declaration package of a run imported from OpenTelemetry spans (the
generic package: the same D, so a run audits the same recorded or traced)."""

OBSERVABLES = (
    ObservableType("task", "artifact", ("text",)),
    ObservableType("plan", "artifact", ("step", "text")),
    ObservableType("ledger", "action", ("step",)),
    ObservableType("instruction", "action", ("step", "to")),
    ObservableType("thought", "action", ("step",)),
    ObservableType("output", "artifact", ("step", "digest")),
    ObservableType("tool_output", "artifact", ("step", "exitcode")),
    ObservableType("stall", "action", ("step",)),
    ObservableType("termination", "action", ("step",)),
)
VALIDATORS = (
    ValidatorSpec("output_evidence", check_output, "1", source="icore.adapters:check_output"),
    ValidatorSpec("ledger_evidence", check_ledger, "1", source="icore.adapters:check_ledger"),
    ValidatorSpec("answer_check", check_answer, "1", source="icore.adapters:check_answer"),
)
_ANY = Preconditions(target_required=False)


def _t(kind: AssertionKind, target: str = "any", *, many: bool = True,
       key: str | None = None, values: tuple[str, ...] | None = None) -> EffectTemplate:
    return EffectTemplate(kind, values=values, key=key, target=target,  # type: ignore[arg-type]
                          many=many)


def _operations(planner: str, assigner: str) -> list[OperationDecl]:
    node = _t(AssertionKind.NODE, "new")
    return [
        OperationDecl("pose_task", ("role:task",), _ANY,
                      (node, _t(AssertionKind.STATUS))),
        OperationDecl("plan", (planner,), _ANY,
                      (node, _t(AssertionKind.ASSIGNEE), _t(AssertionKind.STATUS)),
                      productive=True),
        OperationDecl("replan", (planner,), _ANY,
                      (node, _t(AssertionKind.ASSIGNEE), _t(AssertionKind.STATUS),
                       _t(AssertionKind.RELATION, key="transported_to")),
                      productive=True, removes=True, transports=True),
        OperationDecl("assign", (assigner,), _ANY,
                      (node, _t(AssertionKind.ASSIGNEE), _t(AssertionKind.STATUS))),
        OperationDecl("self_assign", ("*",), _ANY,
                      (node, _t(AssertionKind.ASSIGNEE), _t(AssertionKind.STATUS))),
        OperationDecl("submit", ("*",), _ANY,
                      (_t(AssertionKind.STATUS), _t(AssertionKind.RESULT)),
                      requires=("output_evidence",), productive=True),
        OperationDecl("ledger_update", (assigner,), _ANY, (_t(AssertionKind.CLAIM),),
                      requires=("ledger_evidence",)),
        OperationDecl("terminate", ("*",), _ANY,
                      (_t(AssertionKind.TERMINAL), _t(AssertionKind.STATUS)),
                      requires=("answer_check",), productive=True),
    ]


def _is_tool(name: str) -> bool:
    return name_key(name) in ("computerterminal", "terminal", "executor", "codeexecutor")


def _agents(agents: Mapping[str, str], *, orchestrator: str | None) -> list[AgentDecl]:
    out = [AgentDecl(HUMAN, {}, ("task",))]
    for name, desc in agents.items():
        if name == HUMAN:
            continue
        if orchestrator is not None and name == orchestrator:
            out.append(AgentDecl(name, {"task": 1.0, "planning": 1.0, "analysis": 0.5},
                                 ("assigner", "planner")))
        elif _is_tool(name):
            out.append(AgentDecl(name, {"code": 1.0}, ("tool",)))
        else:
            caps = capabilities(desc or name)
            out.append(AgentDecl(name, {**caps, "task": 0.5, "planning": 0.5}, ("worker",)))
    return out


def magentic_one_declaration(agents: Mapping[str, str]) -> DeclarationPackage:
    """D for a Magentic-One run (Who&When Hand-Crafted).

    The Orchestrator plans, keeps the ledger and assigns; workers submit outputs.

    Args:
        agents: agent id -> declared description (the plan's team block).
    """
    return DeclarationPackage(
        name="who-and-when/magentic-one", version="1",
        observables=OBSERVABLES,
        agents=_agents(agents, orchestrator="Orchestrator"),
        operations=_operations("role:planner", "role:assigner"),
        validators=VALIDATORS,
        parameters=Parameters(epsilon=0.1, patience=3, tau=0.5,
                              responsible_priority="assignee"),
    )


def captain_agent_declaration(agents: Mapping[str, str]) -> DeclarationPackage:
    """D for a CaptainAgent / AG2 group chat (Who&When Algorithm-Generated).

    The chat manager that picks speakers is not recorded, so experts self-assign the
    turn they take; the plan is relayed by the first speaker; nobody holds assignment
    authority (assignment defects are routed to the self-assigning proposer).

    Args:
        agents: agent id -> ``system_prompt`` entry.
    """
    return DeclarationPackage(
        name="who-and-when/captain-agent", version="1",
        observables=OBSERVABLES,
        agents=_agents(agents, orchestrator=None),
        operations=_operations("*", "*"),
        validators=VALIDATORS,
        parameters=Parameters(epsilon=0.1, patience=3, tau=0.5,
                              responsible_priority="assignee"),
    )


def generic_declaration(agents: Mapping[str, str], *, orchestrator: str | None = None,
                        name: str = "icore/generic-jsonl") -> DeclarationPackage:
    """D for a run in the generic JSONL format (see docs/audit-real-runs.md).

    The same D audits a run imported from OpenTelemetry, named ``icore/otel-import``
    (:data:`OTEL_IMPORT`) so its report says where the run came from.

    Args:
        agents: agent id -> declared description.
        orchestrator: the agent that plans and assigns, if the run has one.
        name: the package's name (the report's "declaration package").
    """
    if orchestrator is not None:
        planner, assigner = "role:planner", "role:assigner"
    else:
        planner = assigner = "*"
    return DeclarationPackage(
        name=name, version="1",
        observables=OBSERVABLES,
        agents=_agents(agents, orchestrator=orchestrator),
        operations=_operations(planner, assigner),
        validators=VALIDATORS,
        parameters=Parameters(epsilon=0.1, patience=3, tau=0.5,
                              responsible_priority="assignee"),
    )


__all__ = [
    "HUMAN",
    "OBSERVABLES",
    "OTEL_IMPORT",
    "VALIDATORS",
    "captain_agent_declaration",
    "generic_declaration",
    "magentic_one_declaration",
]
