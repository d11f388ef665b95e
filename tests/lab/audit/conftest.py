"""Fixtures for iCORE-Audit tests: a small declared team over the task-mode D."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from icore.state import (
    CertificateRequest,
    CitedRecord,
    DeclarationPackage,
    Effect,
    EventSpec,
    Proposal,
    State,
    Status,
)
from icore_lab.workloads._tasks import (
    FaultProfile,
    TaskInstance,
    TaskMode,
    WorkerProfile,
    WorkItem,
    declaration,
)

ALICE_CAP = {"code:easy": 0.9, "code:hard": 0.5}
BOB_CAP = {"code:easy": 0.3, "code:hard": 0.2}


def small_instance(**kw: Any) -> TaskInstance:
    """Two code items (o2 depends on o1), alice (strong), bob (weak)."""
    base = TaskInstance(
        mode=TaskMode.DEADLINE,
        seed=0,
        items=(
            WorkItem("o1", "code:easy", 1.0, spec="spec/o1"),
            WorkItem("o2", "code:hard", 2.0, ("o1",), spec="spec/o2"),
        ),
        workers=(
            WorkerProfile("alice", ALICE_CAP, FaultProfile()),
            WorkerProfile("bob", BOB_CAP, FaultProfile()),
        ),
        verifiers=(),
        assigner_noise=0.0,
        coverage=1.0,
        review_accuracy=1.0,
        revisions=(),
        budget=20,
    )
    return replace(base, **kw)


def with_params(decl: DeclarationPackage, **kw: Any) -> DeclarationPackage:
    """The same D with some parameters replaced."""
    return DeclarationPackage(
        name=decl.name,
        version=decl.version,
        observables=decl.observables.values(),
        agents=decl.agents.values(),
        operations=decl.operations.values(),
        validators=decl.validators.values(),
        interfaces=decl.interfaces,
        parameters=replace(decl.parameters, **kw),
    )


class Team:
    """Builds labelled proposals for the small team (fresh event ids each call)."""

    def __init__(self) -> None:
        self.n = 0
        self.heads: dict[str, str] = {}

    def eid(self) -> str:
        self.n += 1
        return f"t{self.n}"

    def introduce(self, items: tuple[WorkItem, ...]) -> Proposal:
        e = self.eid()
        return Proposal(
            "env", "introduce", events=(EventSpec("task", "env", {"item": "*"}, id=e),),
            effects=tuple(
                Effect.node(i.id, i.kind, weight=i.weight, deps=i.deps, required_root=True)
                for i in items
            ),
            justification=(e,),
        )

    def assign(self, oid: str, to: str, by: str = "lead") -> Proposal:
        e = self.eid()
        return Proposal(
            by, "assign", oid, events=(EventSpec("assign", by, {"item": oid, "to": to}, id=e),),
            effects=(Effect.assign(oid, to), Effect.status(oid, Status.ASSIGNED)),
            justification=(e,),
        )

    def submit(self, oid: str, agent: str, *, passed: bool = True, evidence: bool = True,
               record: CitedRecord | None = None) -> Proposal:
        w, t = self.eid(), self.eid()
        events = (
            EventSpec("work", agent, {"item": oid, "spec": 1}, id=w),
            EventSpec("test", agent, {"item": oid, "passed": passed}, (w,), id=t),
        )
        certs = (
            (CertificateRequest("tests_pass", events=(w, t),
                                records=(record,) if record else ()),)
            if evidence else ()
        )
        return Proposal(
            agent, "submit", oid, events=events,
            effects=(Effect.status(oid, Status.DISCHARGED), Effect.result(oid, {"ok": passed})),
            justification=(w, t), certificates=certs,
        )

    def message(self, oid: str, agent: str) -> Proposal:
        e = self.eid()
        return Proposal(
            agent, "message", oid, events=(EventSpec("message", agent, {"item": oid}, id=e),),
            effects=(Effect.claim(oid, "note", "working"),), justification=(e,),
        )

    def fail(self, oid: str, agent: str) -> Proposal:
        e = self.eid()
        return Proposal(
            agent, "report_failure", oid,
            events=(EventSpec("test", agent, {"item": oid, "passed": False}, id=e),),
            effects=(Effect.status(oid, Status.FAILED),), justification=(e,),
        )

    def drop(self, oid: str, agent: str, *, to: str | None = None) -> Proposal:
        e = self.eid()
        effects = (Effect.status(oid, Status.SUPERSEDED),)
        if to is not None:
            effects += (Effect.relation(oid, "transported_to", to),)
        return Proposal(
            agent, "drop", oid, events=(EventSpec("message", agent, {"item": oid}, id=e),),
            effects=effects, justification=(e,),
        )

    def decompose(self, oid: str, agent: str, parts: tuple[str, ...]) -> Proposal:
        e = self.eid()
        effects = tuple(
            Effect.node(p, "code:easy", weight=1.0, parent=oid, required_root=True)
            for p in parts
        )
        effects += (
            Effect.status(oid, Status.SUPERSEDED),
            Effect.relation(oid, "transported_to", parts[0]),
        )
        return Proposal(
            agent, "decompose", oid,
            events=(EventSpec("decompose", agent, {"item": oid}, id=e),),
            effects=effects, justification=(e,),
        )


class Kit:
    """Factory for small states (session-scoped, so Hypothesis tests can use it)."""

    def instance(self, **kw: Any) -> TaskInstance:
        return small_instance(**kw)

    def state(self, *, inst: TaskInstance | None = None, **params: Any) -> tuple[State, Team]:
        inst = inst or small_instance()
        decl = declaration(inst)
        if params:
            decl = with_params(decl, **params)
        x = State(decl)
        team = Team()
        v = x.submit(team.introduce(inst.items))
        assert v.committed, v.reasons
        return x, team


@pytest.fixture(scope="session")
def kit() -> Kit:
    return Kit()
