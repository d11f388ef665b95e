"""Hypothesis properties of the iCORE state (issue 5 "Must show")."""

from __future__ import annotations

from collections import Counter
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from icore.records import Record
from icore.state import (
    AgentDecl,
    AssertionKind,
    CertificateRequest,
    CitedRecord,
    DeclarationPackage,
    Effect,
    EffectTemplate,
    EventSpec,
    MemoryLog,
    ObservableType,
    OperationDecl,
    Parameters,
    Preconditions,
    Proposal,
    State,
    Verdict,
    equivalent,
    normalize,
    rebuild,
)

AGENTS = ["lead", "alice", "bob"]
KEYS = ["spec/a", "spec/b"]
SETTINGS = settings(max_examples=25, deadline=None)


class Driver:
    """Builds (mostly) legal code-review proposals from the current state."""

    def __init__(self, x: State) -> None:
        self.x = x
        self.n = 0
        self.heads: dict[str, str] = {}
        self.seqs: dict[str, int] = {}
        for k in KEYS:
            self.revise(k)

    def revise(self, key: str) -> str:
        seq = self.seqs.get(key, 0) + 1
        self.seqs[key] = seq
        rec = Record.create(key=key, owner="lead", seq=seq, content={"v": seq})
        self.heads[key] = rec.id
        return rec.id

    def eid(self) -> str:
        self.n += 1
        return f"ev{self.n}"

    def oids(self) -> list[str]:
        return sorted(self.x.obligations)

    def proposal(self, data: Any) -> Proposal | None:
        x = self.x
        op = data.draw(
            st.sampled_from(
                [
                    "introduce",
                    "assign",
                    "assign",
                    "start",
                    "start",
                    "submit",
                    "submit",
                    "approve",
                    "approve",
                    "settle",
                    "transfer",
                ]
            )
        )
        oids = self.oids()
        if op == "introduce" or not oids:
            e = self.eid()
            k = data.draw(st.integers(1, 3))
            base = len(oids)
            return Proposal(
                "task",
                "introduce",
                events=(EventSpec("task_posted", "task", {"description": "d"}, id=e),),
                effects=tuple(
                    Effect.node(
                        f"o{base + i}",
                        data.draw(st.sampled_from(["code", "review"])),
                        weight=data.draw(st.sampled_from([0.5, 1.0, 2.0])),
                        required_root=data.draw(st.booleans()),
                    )
                    for i in range(k)
                ),
                justification=(e,),
            )
        wanted = {
            "assign": "open",
            "start": "assigned",
            "submit": "active",
            "approve": "submitted",
            "settle": "discharged",
        }.get(op)
        fit = [i for i in oids if x.obligations[i].effective_status in (wanted, "repair_pending")]
        pool = fit if fit and data.draw(st.integers(0, 4)) > 0 else oids
        oid = data.draw(st.sampled_from(pool))
        o = x.obligations[oid]
        ev0 = next(iter(x.events))
        if op == "assign":
            agent = data.draw(st.sampled_from(["alice", "bob", "alice", "lead"]))
            return Proposal(
                "lead",
                "assign",
                target=oid,
                effects=(Effect.assign(oid, agent), Effect.status(oid, "assigned")),
                justification=(ev0,),
            )
        who = o.assignee or data.draw(st.sampled_from(AGENTS))
        if who == "lead":
            who = "alice"
        if op == "start":
            return Proposal(
                who,
                "start",
                target=oid,
                effects=(Effect.status(oid, "active"),),
                justification=(ev0,),
            )
        if op == "submit":
            pr, ci = self.eid(), self.eid()
            green = data.draw(st.sampled_from(["green", "green", "red"]))
            recs = tuple(CitedRecord(k, self.heads[k]) for k in KEYS if data.draw(st.booleans()))
            return Proposal(
                who,
                "submit",
                target=oid,
                events=(
                    EventSpec("pr_opened", who, {"pr": 1, "sha": pr}, id=pr),
                    EventSpec("ci_run", "ci", {"sha": pr, "status": green}, (pr,), ci),
                ),
                effects=(Effect.status(oid, "submitted"), Effect.result(oid, pr)),
                justification=(pr, ci),
                certificates=(CertificateRequest("ci_green", events=(ci,), records=recs),),
            )
        if op in ("approve", "settle"):
            rv = self.eid()
            verdict = data.draw(st.sampled_from(["approve", "approve", "reject"]))
            effects = (
                (Effect.status(oid, "discharged"), Effect.claim(oid, "reviewed", True))
                if op == "approve"
                else (Effect.status(oid, "settled"),)
            )
            return Proposal(
                "bob" if op == "approve" else "lead",
                op,
                target=oid,
                events=(EventSpec("review_posted", "bob", {"pr": 1, "verdict": verdict}, id=rv),),
                effects=effects,
                justification=(rv,),
                certificates=(CertificateRequest("approved", events=(rv,)),),
            )
        other = data.draw(st.sampled_from(oids))
        return Proposal(
            "lead",
            "transfer",
            target=oid,
            effects=(
                Effect.status(oid, "superseded"),
                Effect.relation(oid, "transported_to", other),
            ),
            justification=(ev0,),
        )

    def submit(self, p: Proposal) -> Verdict:
        return self.x.submit(p, head_view=self.heads.get)


def _qpi(x: State) -> dict[str, Any]:
    n = normalize(x)
    return {"G": n["G"], "Q": n["Q"], "Pi": n["Pi"]}


@SETTINGS
@given(st.data())
def test_legal_updates_preserve_soundness(code_review, data):
    """From a sound state, any sequence of audited updates keeps every obligation sound."""
    d = Driver(State(code_review))
    commits = 0
    for _ in range(data.draw(st.integers(5, 30))):
        p = d.proposal(data)
        assert p is not None
        v = d.submit(p)
        commits += v.committed
        m = d.x.metrics()
        assert m.snd == 1.0
        assert all(d.x.is_sound(o) for o in d.x.obligations)
    assert commits >= 1


@SETTINGS
@given(st.data())
def test_unsupported_effects_are_rejected_and_not_committed(code_review, data):
    """A defect injected into a legal proposal makes it rejected, with nothing committed."""
    d = Driver(State(code_review))
    for _ in range(data.draw(st.integers(3, 15))):
        p = d.proposal(data)
        assert p is not None
        from icore.state import audit

        if not audit(p, d.x, head_view=d.heads.get).committed:
            continue
        defect = data.draw(
            st.sampled_from(
                [
                    "no-justification",
                    "unknown-event",
                    "extra-effect",
                    "unknown-op",
                    "unknown-agent",
                    "missing-cert",
                ]
            )
        )
        target = p.target or p.effects[0].obligation
        fields = {f: getattr(p, f) for f in p.__dataclass_fields__}
        if defect == "no-justification":
            fields["justification"] = ()
        elif defect == "unknown-event":
            fields["justification"] = (*p.justification, "no-such-event")
        elif defect == "extra-effect":
            fields["effects"] = (*p.effects, Effect.claim(target, "bogus", 1))
        elif defect == "unknown-op":
            fields["operation"] = "no-such-op"
        elif defect == "unknown-agent":
            fields["proposer"] = "mallory"
        else:
            if not code_review.operations[p.operation].requires:
                continue
            fields["certificates"] = ()
        bad = Proposal(**fields)
        before, flags = _qpi(d.x), len(d.x.open_flags())
        v = d.submit(bad)
        assert not v.committed and v.reasons
        assert _qpi(d.x) == before
        assert len(d.x.open_flags()) == flags + len(v.flags) and v.flags
        d.submit(p)  # the legal original still commits afterwards
        assert d.x.metrics().snd == 1.0


@SETTINGS
@given(st.data())
def test_revocation_flags_exactly_the_dependents(code_review, data):
    """on_head_change flags exactly the active assertions citing the revoked key's version."""
    d = Driver(State(code_review))
    for _ in range(data.draw(st.integers(5, 25))):
        p = d.proposal(data)
        assert p is not None
        d.submit(p)
    key = data.draw(st.sampled_from(KEYS))
    x = d.x
    revoked = {
        cid
        for cid, c in x.certificates.items()
        if x.certificate_active(cid) and any(r.key == key for r in c.records)
    }
    expected = {
        aid
        for aid, j in x.justifications.items()
        if x.is_active(aid) and revoked & set(j.certificates)
    }
    new = d.revise(key)
    flags = x.on_head_change(key, new)
    got = {a for f in flags for a in f.assertions}
    assert got == expected
    assert {o for f in flags for o in f.obligations} == {
        x.assertions[a].obligation for a in expected
    }
    assert all(not x.certificate_active(c) for c in revoked)
    for oid, o in x.obligations.items():
        assert o.repair_pending == any(x.assertions[a].obligation == oid for a in expected)


@SETTINGS
@given(st.data())
def test_incremental_metrics_equal_full_recompute(code_review, data):
    """After every step (commits, rejections, revocations, imports) incremental == full."""
    d = Driver(State(code_review))
    for _ in range(data.draw(st.integers(5, 30))):
        kind = data.draw(st.sampled_from(["proposal"] * 6 + ["revise", "import"]))
        if kind == "revise":
            key = data.draw(st.sampled_from(KEYS))
            d.x.on_head_change(key, d.revise(key))
        elif kind == "import" and d.x.obligations:
            oid = data.draw(st.sampled_from(d.oids()))
            d.x.import_assertion(
                Effect.result(oid, "claimed"),
                justified=data.draw(st.booleans()),
                events=(next(iter(d.x.events)),),
                operation="submit",
            )
        else:
            p = d.proposal(data)
            assert p is not None
            d.submit(p)
        assert d.x.metrics() == d.x.recompute_metrics()
        counts = Counter(o.effective_status for o in d.x.obligations.values())
        assert d.x.status_counts() == dict(counts)


@SETTINGS
@given(st.data())
def test_rebuild_is_observationally_equivalent(code_review, data):
    """rebuild(log) (through the JSON codec) is observationally equivalent to the live X."""
    log = MemoryLog()
    d = Driver(State(code_review, log=log))
    for _ in range(data.draw(st.integers(3, 25))):
        if data.draw(st.integers(0, 7)) == 0:
            key = data.draw(st.sampled_from(KEYS))
            d.x.on_head_change(key, d.revise(key))
        else:
            p = d.proposal(data)
            assert p is not None
            d.submit(p)
    y = rebuild(log, code_review)
    assert equivalent(d.x, y)
    assert y.metrics() == d.x.metrics()


@st.composite
def _team(draw: Any) -> tuple[DeclarationPackage, list[tuple[float, str | None]]]:
    eps = draw(st.sampled_from([0.0, 0.05, 0.1, 0.3]))
    n_agents = draw(st.integers(1, 4))
    caps = [draw(st.floats(0, 1, allow_nan=False)) for _ in range(n_agents)]
    agents = [AgentDecl(f"g{i}", {"k": c}) for i, c in enumerate(caps)]
    d = DeclarationPackage(
        observables=[ObservableType("obs")],
        agents=agents,
        operations=[
            OperationDecl(
                "introduce",
                preconditions=Preconditions(target_required=False),
                effects=(EffectTemplate(AssertionKind.NODE, target="new", many=True),),
            ),
            OperationDecl("assign", effects=(EffectTemplate(AssertionKind.ASSIGNEE),)),
        ],
        parameters=Parameters(epsilon=eps),
    )
    best = f"g{max(range(n_agents), key=lambda i: caps[i])}"
    obs = []
    for _ in range(draw(st.integers(1, 8))):
        w = draw(st.floats(0, 10, allow_nan=False))
        who = draw(st.sampled_from([best, best, None, *[a.id for a in agents]]))
        obs.append((w, who))
    return d, obs


@SETTINGS
@given(_team())
def test_aggregate_gain_bounded_when_all_stable(team):
    """Componentwise ε-stability bounds the aggregate gain by ε·Σw (design.md 4.3)."""
    d, obs = team
    x = State(d)
    x.submit(
        Proposal(
            "g0",
            "introduce",
            events=(EventSpec("obs", "g0", id="e"),),
            effects=tuple(Effect.node(f"o{i}", "k", weight=w) for i, (w, _) in enumerate(obs)),
            justification=("e",),
        )
    )
    for i, (_, who) in enumerate(obs):
        if who is not None:
            assert x.submit(
                Proposal(
                    "g0",
                    "assign",
                    target=f"o{i}",
                    effects=(Effect.assign(f"o{i}", who),),
                    justification=("e",),
                )
            ).committed
    m = x.metrics()
    assert m == x.recompute_metrics()
    if m.astab == 1.0:
        assert m.aggregate_gain <= m.gain_bound * (1 + 1e-12) + 1e-12
    # componentwise: each stable obligation contributes at most ε·w
    for oid in x.obligations:
        if x.is_stable(oid):
            assert max(0.0, x.gain(oid)) <= d.parameters.epsilon


def _field_sensitive(d: DeclarationPackage) -> DeclarationPackage:
    """``d`` with weight/value/feasible reading every field of the obligation, so the
    pre-write previews the state evaluates them on must equal the applied obligations."""
    from dataclasses import replace

    from icore.state import Status

    statuses = list(Status)

    def weight(o: Any) -> float:
        return (
            1.0
            + len(o.active)
            + 10.0 * o.repair_pending
            + 100.0 * statuses.index(o.status)
            + 1000.0 * (o.assignee is not None)
            + 0.5 * (o.result is not None)
            + o.weight
        )

    def value(a: Any, o: Any) -> float:
        return float(a.capabilities.get(o.kind, 0.0)) * (0.5 if o.repair_pending else 1.0)

    def feasible(a: Any, o: Any) -> bool:
        return o.kind in a.capabilities and not (o.repair_pending and a.id == o.assignee)

    return DeclarationPackage(
        name=d.name,
        version=d.version,
        observables=d.observables.values(),
        agents=d.agents.values(),
        operations=d.operations.values(),
        validators=d.validators.values(),
        interfaces=replace(d.interfaces, weight=weight, value=value, feasible=feasible),
        parameters=d.parameters,
    )


@SETTINGS
@given(st.data())
def test_interface_values_checked_before_the_write_match_the_applied_state(code_review, data):
    """Interface values are computed on previews before the log write (fail closed); after
    every change (commits that supersede revoked evidence, revocations of one or several
    keys, imports citing revoked certificates) they equal a fresh evaluation of the applied
    obligations, and the log replays to the same metrics."""
    decl = _field_sensitive(code_review)
    log = MemoryLog()
    d = Driver(State(decl, log=log))
    x = d.x
    oids = ["o0", "o1", "o2"]
    e0 = d.eid()
    steps = [
        Proposal(
            "task",
            "introduce",
            events=(EventSpec("task_posted", "task", {"description": "d"}, id=e0),),
            effects=tuple(Effect.node(o, "code", required_root=True) for o in oids),
            justification=(e0,),
        )
    ]
    for o in oids:
        steps.append(
            Proposal(
                "lead",
                "assign",
                target=o,
                effects=(Effect.assign(o, "alice"), Effect.status(o, "assigned")),
                justification=(e0,),
            )
        )
        steps.append(
            Proposal(
                "alice",
                "start",
                target=o,
                effects=(Effect.status(o, "active"),),
                justification=(e0,),
            )
        )
    for p in steps:
        assert d.submit(p).committed
    revisions = commits = 0
    for _ in range(data.draw(st.integers(5, 30))):
        kind = data.draw(st.sampled_from(["work"] * 4 + ["revise", "revalidate", "import"]))
        if kind == "revise":
            key = data.draw(st.sampled_from(KEYS))
            revisions += bool(x.on_head_change(key, d.revise(key)))
        elif kind == "revalidate":
            for key in data.draw(st.sets(st.sampled_from(KEYS), min_size=1)):
                d.revise(key)
            revisions += bool(x.revalidate_certificates(d.heads.get))
        elif kind == "import":
            cid = data.draw(st.sampled_from([None, *x.certificates]))
            x.import_assertion(
                Effect.result(data.draw(st.sampled_from(oids)), "claimed"),
                events=(e0,),
                operation="submit",
                certificates=() if cid is None else (cid,),
            )
        else:
            o = data.draw(st.sampled_from(oids))
            status = x.obligations[o].effective_status
            if status in ("active", "repair_pending"):
                pr, ci = d.eid(), d.eid()
                recs = tuple(
                    CitedRecord(k, d.heads[k])
                    for k in data.draw(st.sets(st.sampled_from(KEYS), min_size=1))
                )
                p = Proposal(
                    "alice",
                    "submit",
                    target=o,
                    events=(
                        EventSpec("pr_opened", "alice", {"pr": 1, "sha": pr}, id=pr),
                        EventSpec("ci_run", "ci", {"sha": pr, "status": "green"}, (pr,), ci),
                    ),
                    effects=(Effect.status(o, "submitted"), Effect.result(o, pr)),
                    justification=(pr, ci),
                    certificates=(CertificateRequest("ci_green", events=(ci,), records=recs),),
                )
            elif status == "submitted":
                rv = d.eid()
                p = Proposal(
                    "bob",
                    "approve",
                    target=o,
                    events=(
                        EventSpec("review_posted", "bob", {"pr": 1, "verdict": "approve"}, id=rv),
                    ),
                    effects=(Effect.status(o, "discharged"), Effect.claim(o, "reviewed", True)),
                    justification=(rv,),
                    certificates=(CertificateRequest("approved", events=(rv,)),),
                )
            else:
                continue
            commits += d.submit(p).committed
        for oid, ob in x.obligations.items():
            assert x._t.eval[oid] == x.evaluate(ob), oid
        assert x.metrics() == x.recompute_metrics()
        counts = Counter(ob.effective_status for ob in x.obligations.values())
        assert x.status_counts() == dict(counts)
    y = rebuild(log, decl)
    assert equivalent(x, y)
    assert y.metrics() == x.metrics()
