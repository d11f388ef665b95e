"""``State.commit_all``: a batch of proposals commits entirely or not at all.

A recovery of iCORE-Audit is one audited repair (icore Alg. 1; design.md 4.4): its
proposals are written in one log transaction, or nothing is written (fail closed).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from icore.state import (
    DeclarationPackage,
    Effect,
    EventSpec,
    InterfaceError,
    LogEntry,
    MemoryLog,
    Obligation,
    Proposal,
    SQLiteLog,
    State,
    StateInputError,
    equivalent,
    export_json,
    rebuild,
)
from icore.state._interfaces import declared_weight, status_change_progress


class CountingLog:
    """A log that counts its transactions (``append`` calls)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.appends = 0

    def append(self, entries: Sequence[LogEntry]) -> None:
        self.appends += 1
        self.inner.append(entries)

    def entries(self) -> Iterator[LogEntry]:
        return iter(self.inner.entries())


def introduce(*oids: str, eid: str = "t1") -> Proposal:
    return Proposal(
        "task",
        "introduce",
        events=(EventSpec("task_posted", "task", {"description": "x"}, id=eid),),
        effects=tuple(Effect.node(o, "code", required_root=True) for o in oids),
        justification=(eid,),
    )


def assign(oid: str, agent: str) -> Proposal:
    return Proposal(
        "lead",
        "assign",
        target=oid,
        effects=(Effect.assign(oid, agent), Effect.status(oid, "assigned")),
        justification=("t1",),
    )


def start(oid: str, agent: str) -> Proposal:
    return Proposal(
        agent, "start", target=oid, effects=(Effect.status(oid, "active"),), justification=("t1",)
    )


def snapshot(x: State, log: Any) -> tuple[Any, ...]:
    return (
        x.seq,
        len(log),
        x.entries,
        export_json(x),
        x.metrics(),
        x.recompute_metrics(),
        x.status_counts(),
        x.open_flags(),
    )


def replays_to(path: Path, decl: DeclarationPackage, x: State) -> None:
    with SQLiteLog(path, declaration=decl) as log:
        assert list(log.entries()) == list(x.entries)
        y = rebuild(log, decl)
    assert equivalent(y, x) and export_json(y) == export_json(x)
    assert y.metrics() == x.metrics()


def logged(decl: DeclarationPackage, path: Path) -> tuple[State, SQLiteLog]:
    log = SQLiteLog(path, declaration=decl)
    x = State(decl, log=log)
    assert x.submit(introduce("o1", "o2")).committed
    return x, log


def test_second_proposal_illegal_changes_nothing(code_review, tmp_path) -> None:
    """The first proposal is legal, the second is not: nothing of either is written."""
    path = tmp_path / "x.db"
    x, log = logged(code_review, path)
    before = snapshot(x, log)
    vs = x.commit_all([assign("o1", "alice"), start("o2", "alice")])  # o2 not assigned
    assert [v.committed for v in vs] == [True, False]
    assert "precondition_failed" in {str(c) for c in vs[1].codes}
    assert snapshot(x, log) == before  # seq, entries, metrics; no rejection, no flag
    log.close()
    replays_to(path, code_review, x)


def test_refusal_skips_later_proposals(code_review, tmp_path) -> None:
    x, log = logged(code_review, tmp_path / "x.db")
    vs = x.commit_all([assign("o9", "alice"), assign("o1", "alice")])
    assert len(vs) == 1 and not vs[0].committed
    assert x.seq == 2 and len(log) == 2


def test_legal_batch_commits_everything_in_one_transaction(code_review, tmp_path) -> None:
    """All entries are written in one append, equal to submitting one by one."""
    path = tmp_path / "x.db"
    x, log = logged(code_review, path)
    x.log = counting = CountingLog(log)
    batch = [assign("o1", "alice"), start("o1", "alice"), assign("o2", "bob")]
    vs = x.commit_all(batch)
    assert all(v.committed for v in vs) and counting.appends == 1
    ref = State(code_review)
    ref.submit(introduce("o1", "o2"))
    for p in batch:
        assert ref.submit(p).committed
    assert x.entries == ref.entries
    assert x.obligations["o1"].status == "active" and x.obligations["o2"].assignee == "bob"
    assert x.metrics() == ref.metrics() == x.recompute_metrics()
    log.close()
    replays_to(path, code_review, x)


def test_resolves_flags_in_the_same_transaction(code_review) -> None:
    counting = CountingLog(MemoryLog())
    x = State(code_review, log=counting)
    x.submit(introduce("o1"))
    f = x.raise_flag("unsupported_assertion", obligations=("o1",))
    counting.appends = 0
    vs = x.commit_all([assign("o1", "alice")], resolve=(f.id,), by="lead", note="fixed")
    assert vs[0].committed and counting.appends == 1
    res = x.flag_resolution(f.id)
    assert res is not None and (res.by, res.note) == ("lead", "fixed")
    with pytest.raises(StateInputError):
        x.commit_all([assign("o1", "bob")], resolve=("f99",))
    assert x.obligations["o1"].assignee == "alice"


def test_reused_proposal_id_within_batch_writes_nothing(code_review) -> None:
    x = State(code_review)
    x.submit(introduce("o1", "o2"))
    seq = x.seq
    with pytest.raises(StateInputError):
        x.commit_all(
            [replace(assign("o1", "alice"), id="px"), replace(assign("o2", "bob"), id="px")]
        )
    assert x.seq == seq


def _rigged(decl: DeclarationPackage, what: str) -> DeclarationPackage:
    """``weight`` returns nan on obligation ``bad``; ``progress`` raises on proposal ``pbad``."""

    def weight(o: Obligation) -> Any:
        return math.nan if what == "weight" and o.id == "bad" else declared_weight(o)

    def progress(t: Any) -> Any:
        if what == "progress" and t.proposal.id == "pbad":
            raise RuntimeError("boom")
        return status_change_progress(t)

    return DeclarationPackage(
        name=decl.name,
        version=decl.version,
        observables=decl.observables.values(),
        agents=decl.agents.values(),
        operations=decl.operations.values(),
        validators=decl.validators.values(),
        interfaces=replace(decl.interfaces, weight=weight, progress=progress),
        parameters=decl.parameters,
    )


@pytest.mark.parametrize("what", ["weight", "progress"])
def test_interface_error_on_a_later_proposal_changes_nothing(code_review, tmp_path, what) -> None:
    decl = _rigged(code_review, what)
    path = tmp_path / "x.db"
    x, log = logged(decl, path)
    before = snapshot(x, log)
    bad = replace(introduce("bad", eid="t2"), id="pbad")
    with pytest.raises(InterfaceError) as info:
        x.commit_all([assign("o1", "alice"), bad])
    assert info.value.interface == what
    assert snapshot(x, log) == before
    log.close()
    replays_to(path, decl, x)


_OPS = st.lists(
    st.lists(
        st.tuples(
            st.sampled_from(["assign", "start"]),
            st.sampled_from(["o1", "o2", "o9"]),
            st.sampled_from(["alice", "bob", "carol"]),
        ),
        min_size=1,
        max_size=4,
    ),
    min_size=1,
    max_size=5,
)


@settings(max_examples=40, deadline=None)
@given(batches=_OPS)
def test_batches_are_all_or_nothing(code_review, batches) -> None:
    """Each batch either equals submitting it one by one, or changes nothing at all."""
    log = MemoryLog()
    x = State(code_review, log=log)
    x.submit(introduce("o1", "o2"))
    for batch in batches:
        props = [assign(o, a) if k == "assign" else start(o, a) for k, o, a in batch]
        before = (x.seq, len(log), export_json(x), x.metrics())
        ref = x.copy()
        vs = x.commit_all(props)
        if all(v.committed for v in vs) and len(vs) == len(props):
            for p in props:
                assert ref.submit(p).committed
            assert x.entries == ref.entries
        else:
            assert (x.seq, len(log), export_json(x), x.metrics()) == before
        assert list(log.entries()) == list(x.entries)
        assert x.metrics() == x.recompute_metrics()
