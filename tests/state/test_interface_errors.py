"""A misbehaving interface of I_D fails closed: typed error, X and its log untouched.

Engineering rule: bad input gets a clear, typed error that says what and where, and loses
nothing already committed. Every change checks the interface outputs it needs (weight,
value, feasible, progress) before anything is written, so the log never holds an entry
that cannot be replayed and the live state always equals its replayed log.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from icore.state import (
    BUILTIN_VALIDATORS,
    AgentDecl,
    AssertionKind,
    CertificateRequest,
    CitedRecord,
    DeclarationPackage,
    Effect,
    EffectTemplate,
    EventSpec,
    InterfaceError,
    Interfaces,
    LogError,
    Obligation,
    ObservableType,
    OperationDecl,
    Preconditions,
    Proposal,
    SQLiteLog,
    State,
    StateError,
    ValidatorSpec,
    equivalent,
    export_json,
    rebuild,
)
from icore.state._interfaces import (
    capability_feasible,
    capability_value,
    declared_weight,
    status_change_progress,
)

KEY = "spec/a"
HEADS = {KEY: "r1"}


class Boom(RuntimeError):
    """What a raising interface raises."""


def _bad_obligation(o: Obligation) -> bool:
    """The state of an obligation that makes the rigged interface misbehave."""
    return o.kind == "bad" or o.assignee == "z" or o.repair_pending


def _out(bad: Any) -> Any:
    if isinstance(bad, type) and issubclass(bad, BaseException):
        raise bad("boom")
    return bad


@dataclass
class Rig:
    """Makes ``interface`` return ``bad`` (or raise it) on a bad obligation, or always once
    ``armed`` (progress has no obligation: it misbehaves only when armed)."""

    interface: str | None = None
    bad: Any = None
    armed: bool = False

    def _on(self, name: str, o: Obligation | None) -> bool:
        return self.interface == name and (self.armed or (o is not None and _bad_obligation(o)))

    def interfaces(self) -> Interfaces:
        def weight(o: Obligation) -> Any:
            return _out(self.bad) if self._on("weight", o) else declared_weight(o)

        def value(a: AgentDecl, o: Obligation) -> Any:
            return _out(self.bad) if self._on("value", o) else capability_value(a, o)

        def feasible(a: AgentDecl, o: Obligation) -> Any:
            return _out(self.bad) if self._on("feasible", o) else capability_feasible(a, o)

        def progress(t: Any) -> Any:
            return _out(self.bad) if self._on("progress", None) else status_change_progress(t)

        return Interfaces(value=value, weight=weight, feasible=feasible, progress=progress)


def _decl(rig: Rig) -> DeclarationPackage:
    caps = {"k": 0.5, "bad": 0.5}
    return DeclarationPackage(
        name="rigged",
        observables=[ObservableType("obs")],
        agents=[
            AgentDecl("a", caps, ("task", "assigner")),
            AgentDecl("b", {"k": 0.9, "bad": 0.9}),
            AgentDecl("z", {"k": 0.1, "bad": 0.1}),
        ],
        operations=[
            OperationDecl(
                "introduce",
                preconditions=Preconditions(target_required=False),
                effects=(EffectTemplate(AssertionKind.NODE, target="new", many=True),),
                productive=True,
            ),
            OperationDecl("assign", effects=(EffectTemplate(AssertionKind.ASSIGNEE),)),
            OperationDecl(
                "check", effects=(EffectTemplate(AssertionKind.CLAIM),), requires=("cites",)
            ),
        ],
        validators=[ValidatorSpec("cites", BUILTIN_VALIDATORS["has_records"])],
        interfaces=rig.interfaces(),
    )


def _introduce(oid: str, kind: str = "k") -> Proposal:
    return Proposal("a", "introduce", effects=(Effect.node(oid, kind),), justification=("e0",))


def _assign(oid: str, agent: str) -> Proposal:
    return Proposal(
        "a", "assign", target=oid, effects=(Effect.assign(oid, agent),), justification=("e0",)
    )


def _history(x: State) -> None:
    """A committed history: o1 introduced, assigned to b, checked against record r1."""
    first = Proposal(
        "a",
        "introduce",
        events=(EventSpec("obs", "a", id="e0"),),
        effects=(Effect.node("o1", "k"),),
        justification=("e0",),
    )
    for p in (first, _assign("o1", "b")):
        assert x.submit(p).committed
    check = Proposal(
        "a",
        "check",
        target="o1",
        effects=(Effect.claim("o1", "checked"),),
        justification=("e0",),
        certificates=(
            CertificateRequest("cites", events=("e0",), records=(CitedRecord(KEY, "r1"),)),
        ),
    )
    v = x.submit(check, head_view=HEADS.get)
    assert v.committed, v.reasons


def _snapshot(x: State, log: SQLiteLog) -> tuple[Any, ...]:
    return (
        x.seq,
        len(log),
        export_json(x),
        x.metrics(),
        x.recompute_metrics(),
        x.evaluated(),
        x.status_counts(),
        x.entries,
        x.open_flags(),
    )


def _assert_log_replays_to(path: Path, decl: DeclarationPackage, x: State) -> None:
    """Reopen the SQLite file: it replays to exactly the live state."""
    with SQLiteLog(path, declaration=decl) as log:
        assert len(log) == x.seq
        assert list(log.entries()) == list(x.entries)
        y = rebuild(log, decl)
    assert equivalent(y, x)
    assert export_json(y) == export_json(x)
    assert y.metrics() == x.metrics() == x.recompute_metrics()


# (interface, bad output or exception class raised)
MISBEHAVIOURS = [
    ("weight", math.nan),
    ("weight", -1.0),
    ("weight", math.inf),
    ("weight", "1.0"),
    ("weight", None),
    ("weight", True),
    ("weight", 10**400),
    ("weight", Boom),
    ("value", math.nan),
    ("value", 1.5),
    ("value", -0.25),
    ("value", math.inf),
    ("value", None),
    ("value", "0.5"),
    ("value", Boom),
    ("feasible", "yes"),
    ("feasible", None),
    ("feasible", 1),
    ("feasible", Boom),
]

# (name, the update, the obligation the error must name)
UPDATES: list[tuple[str, Callable[[State], object], str]] = [
    ("submit_new_obligation", lambda x: x.submit(_introduce("o9", "bad")), "o9"),
    ("submit_assignment", lambda x: x.submit(_assign("o1", "z")), "o1"),
    (
        "import_new_obligation",
        lambda x: x.import_assertion(
            Effect.node("o9", "bad"), events=("e0",), operation="introduce"
        ),
        "o9",
    ),
    (
        "import_assignment",
        lambda x: x.import_assertion(Effect.assign("o1", "z"), events=("e0",), operation="assign"),
        "o1",
    ),
    ("revocation", lambda x: x.on_head_change(KEY, "r2"), "o1"),
    ("revalidation", lambda x: x.revalidate_certificates({KEY: "r2"}.get), "o1"),
]


def _check_value(err: InterfaceError, bad: Any) -> None:
    if isinstance(bad, type):
        assert isinstance(err.value, bad)
        assert isinstance(err.__cause__, bad)
        assert "raised Boom: boom" in str(err)
    elif isinstance(bad, float) and math.isnan(bad):
        assert math.isnan(err.value)
    else:
        assert err.value == bad and type(err.value) is type(bad)
        assert repr(bad)[:20] in str(err)


class TestFailClosed:
    """The failed update leaves X and the SQLite log exactly as before the call."""

    @pytest.mark.parametrize(("update", "do", "oid"), UPDATES, ids=[u[0] for u in UPDATES])
    @pytest.mark.parametrize(
        ("interface", "bad"), MISBEHAVIOURS, ids=[f"{i}-{b!r:.12}" for i, b in MISBEHAVIOURS]
    )
    def test_bad_interface_output_changes_nothing(self, tmp_path, interface, bad, update, do, oid):
        rig = Rig()
        decl = _decl(rig)
        path = tmp_path / "x.db"
        log = SQLiteLog(path, declaration=decl)
        x = State(decl, log=log)
        _history(x)
        before = _snapshot(x, log)
        rig.interface, rig.bad = interface, bad

        with pytest.raises(InterfaceError) as info:
            do(x)

        err = info.value
        assert isinstance(err, StateError)
        assert err.interface == interface
        assert err.fields["obligation"] == oid
        assert oid in err.field and err.field.startswith(f"{interface}(")
        assert f"interfaces.{interface}" in str(err)
        _check_value(err, bad)
        assert _snapshot(x, log) == before
        log.close()
        _assert_log_replays_to(path, decl, x)

        # nothing lost: once D behaves again the same state and log carry on
        rig.interface = None
        x.log = log = SQLiteLog(path, declaration=decl)
        do(x)
        assert x.submit(_introduce("o2")).committed
        log.close()
        _assert_log_replays_to(path, decl, x)

    @pytest.mark.parametrize("bad", [Boom, "yes", None, 1], ids=repr)
    def test_bad_progress_output_changes_nothing(self, tmp_path, bad):
        rig = Rig("progress", bad, armed=False)
        decl = _decl(rig)
        path = tmp_path / "x.db"
        log = SQLiteLog(path, declaration=decl)
        x = State(decl, log=log)
        _history(x)
        before = _snapshot(x, log)
        rig.armed = True

        with pytest.raises(InterfaceError) as info:
            x.submit(_introduce("o2"))

        err = info.value
        assert err.interface == "progress"
        assert err.field == "progress(p4)" and err.fields["proposal"] == "p4"
        assert err.fields["operation"] == "introduce"
        _check_value(err, bad)
        assert _snapshot(x, log) == before
        log.close()
        _assert_log_replays_to(path, decl, x)

    def test_error_message_names_interface_field_and_value(self, tmp_path):
        rig = Rig("weight", math.nan)
        x = State(_decl(rig), log=SQLiteLog(tmp_path / "x.db"))
        _history(x)
        with pytest.raises(InterfaceError, match=r"interfaces\.weight: weight\(o9\) returned nan"):
            x.submit(_introduce("o9", "bad"))

    def test_queries_raise_the_typed_error_too(self):
        """freeze, a full recompute and gain read the same interfaces; metrics over W_F
        uses the frozen weights and the maintained evaluations (no interface call)."""
        rig = Rig()
        x = State(_decl(rig))
        _history(x)
        w_f = x.freeze(["o1"])
        rig.interface, rig.bad, rig.armed = "weight", -2.0, True
        with pytest.raises(InterfaceError, match=r"weight\(o1\) returned -2\.0"):
            x.freeze(["o1"])
        assert x.metrics(over=w_f).total_weight == w_f.weights[0]
        with pytest.raises(InterfaceError, match=r"weight\(o1\)"):
            x.recompute_metrics()
        rig.interface, rig.bad = "value", math.nan
        with pytest.raises(InterfaceError, match=r"value\([abz], o1\) returned nan"):
            x.gain("o1")
        rig.interface, rig.bad = "feasible", "no"
        with pytest.raises(InterfaceError, match=r"feasible\([az], o1\) returned 'no'"):
            x.is_stable("o1")

    def test_rebuild_blames_the_interface_not_the_log(self, tmp_path):
        rig = Rig()
        decl = _decl(rig)
        path = tmp_path / "x.db"
        with SQLiteLog(path, declaration=decl) as log:
            _history(State(decl, log=log))
        rig.interface, rig.bad, rig.armed = "weight", math.nan, True
        with SQLiteLog(path, declaration=decl) as log, pytest.raises(InterfaceError) as info:
            rebuild(log, decl)
        assert not isinstance(info.value, LogError)
        assert info.value.fields["obligation"] == "o1"


# ----------------------------------------------------------------------- property
_STEPS = st.lists(
    st.tuples(
        st.sampled_from(["introduce", "assign", "import_node", "import_assign", "note"]),
        st.booleans(),  # bad?
        st.sampled_from(MISBEHAVIOURS),
        st.sampled_from(["a", "b"]),
    ),
    min_size=1,
    max_size=12,
)


@settings(max_examples=30, deadline=None)
@given(steps=_STEPS)
def test_replayed_log_always_equals_live_state(tmp_path_factory, steps):
    """Random good and bad updates: every bad one raises and changes nothing, and the
    reopened SQLite log always replays to the live state."""
    rig = Rig()
    decl = _decl(rig)
    path = tmp_path_factory.mktemp("prop") / "x.db"
    log = SQLiteLog(path, declaration=decl)
    x = State(decl, log=log)
    _history(x)
    n = 1
    for kind, bad, (interface, out), agent in steps:
        n += 1
        oid = f"o{n}"
        rig.interface, rig.bad = (interface, out) if bad else (None, None)
        before = (x.seq, len(log), export_json(x))
        err: InterfaceError | None = None
        try:
            if kind == "introduce":
                assert x.submit(_introduce(oid, "bad" if bad else "k")).committed
            elif kind == "assign":
                assert x.submit(_assign("o1", "z" if bad else agent)).committed
            elif kind == "import_node":
                x.import_assertion(
                    Effect.node(oid, "bad" if bad else "k"), events=("e0",), operation="introduce"
                )
            elif kind == "import_assign":
                x.import_assertion(
                    Effect.assign("o1", "z" if bad else agent), events=("e0",), operation="assign"
                )
            else:
                x.record_note("diagnosis", {"n": n})
        except InterfaceError as exc:
            err = exc
        if bad and kind != "note":
            assert err is not None and err.interface == interface
            assert (x.seq, len(log), export_json(x)) == before
        else:
            assert err is None
        assert x.seq == len(log)
        assert x.metrics() == x.recompute_metrics()
    log.close()
    rig.interface = None
    _assert_log_replays_to(path, decl, x)


# ----------------------------------------------------------------------- routing and views
@dataclass(frozen=True)
class _F:
    """A minimal diagnosis F (``DiagnosisLike``)."""

    defect: str = "work"
    obligations: tuple[str, ...] = ("o1",)
    proposer: str | None = None
    id: str = "d1"


def _with(x: State, **kw: Any) -> State:
    """``x`` with some interfaces of its D replaced (same log, same entries)."""
    from dataclasses import replace

    d = x.decl
    x.decl = DeclarationPackage(
        name=d.name,
        observables=d.observables.values(),
        agents=d.agents.values(),
        operations=d.operations.values(),
        validators=d.validators.values(),
        interfaces=replace(d.interfaces, **kw),
        parameters=d.parameters,
    )
    return x


def _const(bad: Any) -> Callable[..., Any]:
    return lambda *args: _out(bad)


class TestRoutingAndViews:
    """terminal, local_view, responsible and assignment_authority are checked too."""

    @pytest.mark.parametrize("bad", ["yes", None, 1, Boom], ids=repr)
    def test_terminal(self, tmp_path, bad):
        log = SQLiteLog(tmp_path / "x.db", declaration=_decl(Rig()))
        x = State(_decl(Rig()), log=log)
        _history(x)
        before = _snapshot(x, log)
        _with(x, terminal=_const(bad))
        with pytest.raises(InterfaceError) as info:
            x.terminal()
        err = info.value
        assert (err.interface, err.field) == ("terminal", "terminal(X)")
        assert "interfaces.terminal: terminal(X)" in str(err)
        _check_value(err, bad)
        assert _snapshot(x, log) == before

    @pytest.mark.parametrize("bad", [{"o": math.nan}, {"o": object()}, {1j: 1}, Boom],
                             ids=["nan", "object", "complex-key", "raises"])
    def test_local_view(self, bad):
        x = _with(State(_decl(Rig())), local_view=_const(bad))
        _history(x)
        with pytest.raises(InterfaceError) as info:
            x.local_view("b")
        err = info.value
        assert (err.interface, err.field) == ("local_view", "local_view(b, X)")
        assert err.fields["agent"] == "b"
        assert err.value is bad or isinstance(err.value, Boom)

    @pytest.mark.parametrize("bad", ["mallory", 7, ("b",), Boom], ids=repr)
    def test_responsible(self, bad):
        x = State(_decl(Rig()))
        _history(x)
        assert x.responsible(_F()) == "b"  # built-in: the assignee of o1
        _with(x, responsible=_const(bad))
        seq = x.seq
        with pytest.raises(InterfaceError) as info:
            x.responsible(_F())
        err = info.value
        assert (err.interface, err.field, err.fields["diagnosis"]) == (
            "responsible",
            "responsible(X, d1)",
            "d1",
        )
        _check_value(err, bad)
        assert x.seq == seq
        _with(x, responsible=_const(None))
        assert x.responsible(_F()) is None  # "nobody" is a legal answer

    @pytest.mark.parametrize("bad", ["a", ["ghost"], [1], None, Boom], ids=repr)
    def test_assignment_authority(self, bad):
        x = State(_decl(Rig()))
        _history(x)
        assert x.assignment_authority() == ("a",)
        assert x.responsible(_F(defect="assignment")) == "a"
        _with(x, assignment_authority=_const(bad))
        for call in (x.assignment_authority, lambda: x.responsible(_F(defect="assignment"))):
            with pytest.raises(InterfaceError) as info:
                call()
            err = info.value
            assert (err.interface, err.field) == ("assignment_authority", "assignment_authority(X)")
            _check_value(err, bad)
