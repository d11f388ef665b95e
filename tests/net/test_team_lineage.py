"""Revocation follows derivation over the real TCP owner client (issue 30 item 1)."""

from __future__ import annotations

from pathlib import Path

from icore.net import ServerThread, SyncOwnerClient, client_context, server_context
from icore.state import (
    CertificateRequest,
    CitedRecord,
    Effect,
    EventSpec,
    FlagKind,
    Proposal,
    State,
    Status,
    load_declaration,
    owners_head_view,
)

CODE_REVIEW = Path(__file__).resolve().parents[2] / "examples" / "declarations" / \
    "code_review.yaml"


def _ok(x: State, p: Proposal, view=None) -> None:
    v = x.submit(p, head_view=view)
    assert v.committed, v.reasons


def test_revising_an_input_over_tcp_revokes_the_derived_certificate(world, servers,
                                                                    certs: Path) -> None:
    """A certificate over the executor's plan depends on each owner's requirement; the
    heads and the records come over authenticated TCP (nothing local)."""

    ex = ServerThread(world.local, agent="executor",
                      ssl_context=server_context(certs, "executor"))
    try:
        addrs = {o: t.address for o, t in servers.items()} | {"executor": ex.address}
        with SyncOwnerClient(addrs, identity="executor",
                             ssl_context=client_context(certs, "executor")) as client:
            view = owners_head_view(client, ownership=world.ownership)
            anc = view.ancestors(CitedRecord.of(world.plan))
            assert {a.key for a in anc} == {"req/a", "req/b", "req/c"}
            x = State(load_declaration(CODE_REVIEW))
            _ok(x, Proposal("task", "introduce", events=(EventSpec("task_posted", "task",
                                                                   {"description": "x"},
                                                                   id="t"),),
                            effects=(Effect.node("o1", "code", required_root=True),),
                            justification=("t",)))
            _ok(x, Proposal("lead", "assign", target="o1",
                            effects=(Effect.assign("o1", "alice"),
                                     Effect.status("o1", "assigned")), justification=("t",)))
            _ok(x, Proposal("alice", "start", target="o1",
                            effects=(Effect.status("o1", "active"),), justification=("t",)))
            _ok(x, Proposal("alice", "submit", target="o1", events=(
                EventSpec("pr_opened", "alice", {"pr": 1, "sha": "s1"}, id="pr"),
                EventSpec("ci_run", "ci", {"sha": "s1", "status": "green"}, ("pr",), "ci")),
                effects=(Effect.status("o1", "submitted"), Effect.result("o1", {"sha": "s1"})),
                justification=("pr", "ci"),
                certificates=(CertificateRequest("ci_green", events=("ci",),
                                                 records=(CitedRecord.of(world.plan),)),)),
                view)
            assert x.revalidate_certificates(view) == []
            world.revise("b")
            (flag,) = x.revalidate_certificates(view)
            assert flag.kind == FlagKind.REVOCATION
            assert x.obligations["o1"].effective_status == Status.REPAIR_PENDING
    finally:
        ex.close()
