"""Fixtures for icore.state tests: the example declaration packages and a driven flow."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from types import MappingProxyType
from typing import Any

import pytest

from icore.records import Record
from icore.state import (
    CertificateRequest,
    CitedRecord,
    DeclarationPackage,
    Effect,
    EventSpec,
    Proposal,
    State,
    Verdict,
    load_declaration,
)

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "declarations"


@pytest.fixture(scope="session")
def code_review() -> DeclarationPackage:
    """The code-review team example D."""
    return load_declaration(EXAMPLES / "code_review.yaml")


@pytest.fixture(scope="session")
def reservation() -> DeclarationPackage:
    """The PlanFence reservation workflow example D."""
    return load_declaration(EXAMPLES / "planfence_reservation.yaml")


@pytest.fixture(scope="session")
def research() -> DeclarationPackage:
    """The research-report team example D."""
    return load_declaration(EXAMPLES / "research_report.yaml")


class Flow:
    """Drives a code-review state through legal steps (each asserted committed)."""

    def __init__(self, state: State) -> None:
        self.x = state
        self.heads: dict[str, str] = {}
        self.n = 0

    def ok(self, p: Proposal) -> Verdict:
        v = self.x.submit(p, head_view=self.heads.get)
        assert v.committed, v.reasons
        return v

    def introduce(self, *oids: str, kind: str = "code", weight: float = 1.0) -> None:
        self.n += 1
        eid = f"task{self.n}"
        self.ok(
            Proposal(
                "task",
                "introduce",
                events=(EventSpec("task_posted", "task", {"description": "x"}, id=eid),),
                effects=tuple(
                    Effect.node(o, kind, weight=weight, required_root=True) for o in oids
                ),
                justification=(eid,),
            )
        )

    def assign(self, oid: str, agent: str) -> None:
        self.ok(
            Proposal(
                "lead",
                "assign",
                target=oid,
                effects=(Effect.assign(oid, agent), Effect.status(oid, "assigned")),
                justification=(self.any_event(),),
            )
        )

    def start(self, oid: str, agent: str) -> None:
        self.ok(
            Proposal(
                agent,
                "start",
                target=oid,
                effects=(Effect.status(oid, "active"),),
                justification=(self.any_event(),),
            )
        )

    def submit_proposal(
        self, oid: str, agent: str, *, record: Record | None = None, status: str = "green"
    ) -> Proposal:
        self.n += 1
        pr, ci = f"pr{self.n}", f"ci{self.n}"
        records = (CitedRecord.of(record),) if record is not None else ()
        return Proposal(
            agent,
            "submit",
            target=oid,
            events=(
                EventSpec("pr_opened", agent, {"pr": self.n, "sha": f"s{self.n}"}, id=pr),
                EventSpec("ci_run", "ci", {"sha": f"s{self.n}", "status": status}, (pr,), ci),
            ),
            effects=(Effect.status(oid, "submitted"), Effect.result(oid, {"sha": f"s{self.n}"})),
            justification=(pr, ci),
            certificates=(CertificateRequest("ci_green", events=(ci,), records=records),),
        )

    def submit(self, oid: str, agent: str, *, record: Record | None = None) -> Verdict:
        return self.ok(self.submit_proposal(oid, agent, record=record))

    def approve_proposal(self, oid: str, verdict: str = "approve") -> Proposal:
        self.n += 1
        rv = f"rv{self.n}"
        return Proposal(
            "bob",
            "approve",
            target=oid,
            events=(EventSpec("review_posted", "bob", {"pr": 1, "verdict": verdict}, id=rv),),
            effects=(Effect.status(oid, "discharged"), Effect.claim(oid, "reviewed", True)),
            justification=(rv,),
            certificates=(CertificateRequest("approved", events=(rv,)),),
        )

    def any_event(self) -> str:
        return next(iter(self.x.events))


@pytest.fixture
def flow(code_review: DeclarationPackage) -> Flow:
    """A fresh code-review state with a driver."""
    return Flow(State(code_review))


@pytest.fixture
def make_flow(code_review: DeclarationPackage) -> Callable[[State], Flow]:
    """Wrap an existing state in a driver."""
    return Flow


def replay_as_dict(t: Any, ops: Any, value: Callable[[str, int], Any],
                   same: Callable[[Any, dict[str, Any]], None], first: tuple[str, Any]) -> None:
    """Apply ``ops`` ((op, key, n): set / del / pop / pop with a default) to the table
    ``t`` and to a dict alike, checking after each that they agree (``same``); then its
    read-only view, ``clear`` and a first write ``first`` (key, value) back in columns."""
    d: dict[str, Any] = {}
    for op, key, n in ops:
        if op == "set":
            t[key] = d[key] = value(key, n)
        elif op in ("del", "pop"):
            if key in d:
                if op == "del":
                    del t[key]
                    del d[key]
                else:
                    assert t.pop(key) == d.pop(key)
            else:
                with pytest.raises(KeyError):
                    t.pop(key) if op == "pop" else t.__delitem__(key)
        else:
            assert t.pop(key, None) == d.pop(key, None)
        same(t, d)
    proxy: Any = MappingProxyType(t)
    assert dict(proxy) == d and list(proxy.values()) == list(d.values())
    t.clear()
    assert len(t) == 0 and list(t) == []
    t[first[0]] = first[1]
    assert list(t.values()) == [first[1]] and t._d is None


def same_as_dict(t: Any, d: dict[str, Any], probes: list[str]) -> None:
    """The table ``t`` reads exactly as the dict ``d``: order, views, length, equality,
    and membership, ``get`` and ``[]`` of each key in ``probes``."""
    assert list(t) == list(d)
    assert list(t.keys()) == list(d.keys())
    assert list(t.values()) == list(d.values())
    assert list(t.items()) == list(d.items())
    assert len(t) == len(d)
    assert t == d and d == t
    for k in probes:
        assert (k in t) == (k in d)
        assert t.get(k) == d.get(k)
        assert t.get(k, -1) == d.get(k, -1)
        if k in d:
            assert t[k] == d[k]
        else:
            with pytest.raises(KeyError):
                t[k]
