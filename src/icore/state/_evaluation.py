"""Soundness, stability and the evaluation of one obligation (design.md 4.3; icore Def. 9).

:class:`Evaluation` is the part of :class:`~icore.state.State` that reads X to judge it:
whether an assertion is sound (its justification, certificates and citations), whether
an obligation is sound (its decision-relevant assertions, and the removal evidence of a
closed one), its gain and ε-stability, and its :class:`ObligationEval` (W membership,
fixed-point weight, soundness, stability, weighted gain) that the metric sums add up.
It reads X's tables and keeps the incrementally maintained evaluations and metric sums
(design.md 4.4 "recompute incrementally").
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from math import copysign

from icore.state._components import AgentDecl
from icore.state._errors import StateInputError
from icore.state._interfaces import (
    capability_feasible,
    capability_value,
    checked_feasible,
    checked_value,
    checked_weight,
)
from icore.state._metrics import (
    MatchedSet,
    Metrics,
    MetricSums,
    ObligationEval,
    fixed,
    make_metrics,
)
from icore.state._package import DeclarationPackage
from icore.state._refs import ActiveIds, Ref, active_ref, active_refs, ref
from icore.state._tables import MISSING, Tables
from icore.state._xmodel import (
    CLOSED_STATUSES,
    TRANSPORTED_TO,
    Assertion,
    AssertionKind,
    Obligation,
    Status,
)

_ZERO = 0


def _first_other(top: tuple[tuple[float, str], ...], assignee: str | None) -> float | None:
    """The value of the first of ``top`` whose agent is not ``assignee`` (no generator)."""
    for v, agent in top:
        if agent != assignee:
            return v
    return None


class Evaluation:
    """Readouts of X: soundness, stability, per-obligation evaluation and the metrics.

    A part of :class:`~icore.state.State` (composition): it reads X's :class:`Tables`
    (public attributes shared by the state's parts) and D, and writes only the
    evaluation map and the metric sums (:meth:`refresh`). The state exposes each public
    method as its own.

    Args:
        tables: X's tables.
        decl: the declaration package D.
    """

    __slots__ = ("_assertions", "_best", "_best_of", "_certs", "_eval", "_evals", "_events",
                 "_obligations", "_pi", "_revoked", "_sound_memo", "_sums", "_t", "_tainted",
                 "decl")

    def __init__(self, tables: Tables, decl: DeclarationPackage) -> None:
        self.decl = decl
        self._best: dict[str, tuple[tuple[float, str], ...] | None] = {}
        """Per capability kind, the two agents of D able to do it best (built-in
        interfaces only; None: some agent's value needs the checked path)."""
        self._best_of: tuple[int, int] = (0, -1)
        self._t = tables
        # the same objects as the tables' (mutated in place, never rebound)
        self._events = tables.events
        self._obligations = tables.obligations
        self._assertions = tables.assertions
        self._pi = tables.pi
        self._certs = tables.certs
        self._revoked = tables.revoked
        self._tainted = tables.tainted
        self._sound_memo = tables.sound_memo
        self._eval = tables.eval
        self._sums = tables.sums
        # equal evaluations share one (frozen) object: most obligations evaluate alike
        self._evals: dict[tuple[bool, bool, bool, float, float], ObligationEval] = {}

    # ------------------------------------------------------------------ soundness
    def assertion_sound(self, assertion_id: str) -> bool:
        """Soundness of one assertion (design.md 4.3 "sound assertion").

        Its justification exists and cites at least one event, all in G; its operation is
        in Ω and declares an effect of the assertion's kind; every certificate exists, is
        active and passed; the operation's required certificate kinds are present; the
        assertions it cited were sound when it was committed; and no revocation has reached
        it, directly or through the assertions it cites (docs/state.md). Memoized (a byte per
        assertion: :class:`~icore.state._refs.SoundMemo`); a revocation clears the memo.
        """
        return self._sound_ref(ref(assertion_id))

    def _sound_ref(self, r: Ref) -> bool:
        """:meth:`assertion_sound` of the assertion of ref ``r`` (icore.state._refs)."""
        memo = self._sound_memo
        if type(r) is int:  # SoundMemo.get, inlined (hot)
            bits = memo.bits
            if r < len(bits) and bits[r]:
                return bits[r] == 2
        if memo.other:
            known = memo.other.get(r)
            if known is not None:
                return known
        a = self._assertions.at(r)
        if a is None:
            return False
        out = self._assertion_sound(a, r)
        if type(r) is int and r < len(memo.bits):  # SoundMemo.put, inlined (hot)
            memo.bits[r] = 2 if out else 1
        else:  # its bytes grow with the assertions (an existing a<n>: n <= the table's end)
            memo.put(r, out, 2 * len(self._assertions) + 4096)
        return out

    def _assertion_sound(self, a: Assertion, r: Ref) -> bool:
        j = self._pi.at(r)
        if j is None or not a.cited_sound or not j.events:
            return False
        if self._tainted and a.id in self._tainted:
            return False
        ev = self._events
        for e in j.events:
            if e not in ev:
                return False
        op = self.decl.operations.get(j.operation) if j.operation is not None else None
        if op is None:
            return False
        if a.kind not in self.decl.effect_kinds(op.name):
            return False
        kinds: set[str] = set()
        for cid in j.certificates:
            c = self._certs.get(cid)
            if c is None or not c.verdict or cid in self._revoked:
                return False
            kinds.add(c.validator)
        return kinds.issuperset(op.requires)  # all(r in kinds ...) without a generator

    def _decision_relevant(self, o: Obligation) -> Iterable[Ref]:
        """Decision-relevant active assertions of ``o`` as refs (design.md 4.3, narrowed).

        For an open obligation: every active assertion. For a settled/superseded one: the
        closing status assertion and terminal markers (its closing evidence still matters
        for required roots and matched sets).
        """
        m = o.active
        if o.status not in CLOSED_STATUSES:
            return m.refs() if type(m) is ActiveIds else active_refs(m)
        keep = (active_ref(m, ("status", "")), active_ref(m, ("terminal", "")))
        return [r for r in keep if r is not None]

    def is_sound(self, obligation_id: str) -> bool:
        """Whether the obligation is sound.

        Every decision-relevant assertion of the obligation is sound, and a settled or
        superseded obligation carries valid removal evidence (:meth:`removal_supported`).
        """
        o = self._obligations.get(obligation_id)
        if o is None:
            return False
        return self._sound(o)

    def _sound(self, o: Obligation) -> bool:
        sound = self._sound_ref
        for r in self._decision_relevant(o):
            if not sound(r):
                return False
        return o.status not in CLOSED_STATUSES or self._removal_ok(o)

    def removal_supported(self, obligation_id: str) -> bool:
        """A settled/superseded obligation carries valid settlement or transport evidence.

        Settlement: its closing status assertion comes from a settling operation and cites
        an active certificate (of a kind the operation requires, when it requires any)
        that cites the obligation. Transport: its closing assertion comes from a removing,
        transporting operation and an active, sound ``transported_to`` relation names a
        replacement that is tied to it: created by the same proposal (or, for imported
        assertions, on the same evidence: its ``node`` assertion shares a justifying event
        with the relation), or cited together with it by an active certificate of the
        relation's justification; a required root's replacement is a required root.
        False for an obligation that is not closed or unknown (icore Def. 6, design.md 4.3).
        """
        o = self._obligations.get(obligation_id)
        return o is not None and o.status in CLOSED_STATUSES and self._removal_ok(o)

    def _cited_obligations(self, cids: Iterable[str], kinds: Sequence[str]) -> set[str]:
        out: set[str] = set()
        for cid in cids:
            c = self._certs.get(cid)
            if (
                c is not None
                and c.verdict
                and cid not in self._revoked
                and (not kinds or c.validator in kinds)
            ):
                out.update(c.obligations)
        return out

    def _removal_ok(self, o: Obligation) -> bool:
        st = o.active.get(("status", ""))
        j = None if st is None else self._pi.get(st)
        op = None if j is None or j.operation is None else self.decl.operations.get(j.operation)
        if j is None or op is None:
            return False
        if op.settles and o.id in self._cited_obligations(j.certificates, op.requires):
            return True
        if o.status != Status.SUPERSEDED or not (op.removes and op.transports):
            return False
        rid = o.active.get((str(AssertionKind.RELATION), TRANSPORTED_TO))
        if rid is None or not self.assertion_sound(rid):
            return False
        rel = self._assertions[rid]
        t = self._obligations.get(rel.value) if isinstance(rel.value, str) else None
        if t is None or t.id == o.id or (o.required_root and not t.required_root):
            return False
        rj = self._pi[rid]
        tied = self._cited_obligations(rj.certificates, ())
        if o.id in tied and t.id in tied:
            return True
        node = self._assertions.get(t.active.get((str(AssertionKind.NODE), ""), ""))
        if node is None:
            return False
        if rel.proposal is not None:
            return node.proposal == rel.proposal
        nj = self._pi.get(node.id)
        return nj is not None and bool(set(nj.events) & set(rj.events))

    # ------------------------------------------------------------------ stability
    def gain(self, obligation_id: str) -> float:
        """The gain of reassigning the obligation (icore Def. 9; design.md 4.3).

        This is gain(o) of Def. 9.

        Assigned to a: ``max_{b feasible, b != a} value(b, o) - value(a, o)``, 0.0 when no
        alternative is feasible. Unassigned: the best feasible value (0.0 when none).
        Settled/superseded obligations have gain 0.0 (nothing to reassign).

        Raises:
            StateInputError: unknown obligation.
            InterfaceError: ``feasible`` or ``value`` raised, or returned a non-bool / a
                value outside [0, 1].
        """
        o = self._obligations.get(obligation_id)
        if o is None:
            raise StateInputError("unknown obligation", obligation=obligation_id)
        return self._gain(o)

    def _gain(self, o: Obligation) -> float:
        if o.status in CLOSED_STATUSES:
            return 0.0
        iface = self.decl.interfaces
        best: float | None = None
        kind = o.kind
        builtin = (iface.value is capability_value and iface.feasible is capability_feasible
                   and type(kind) is str)
        top = self._top(kind) if builtin else None
        if top is not None:  # the same values as the loop below, without visiting D
            best = _first_other(top, o.assignee)
        for b in (() if top is not None else self.decl.agents.values()):
            if b.id == o.assignee:
                continue
            caps = b.capabilities
            if builtin and type(caps) is dict:  # the built-ins, inlined (same values)
                if kind not in caps:
                    continue
                v = caps[kind]
                if type(v) is not float or not 0.0 <= v <= 1.0:
                    v = checked_value(iface, b, o)  # an int, or out of range: its error
            else:
                if not checked_feasible(iface, b, o):
                    continue
                v = checked_value(iface, b, o)
            if best is None or v > best:
                best = v
        if o.assignee is None:
            return 0.0 if best is None else best
        if best is None:
            return 0.0
        a = self.decl.agents.get(o.assignee)
        va = checked_value(iface, a, o) if a is not None else 0.0
        return best - va

    def _top(self, kind: str) -> tuple[tuple[float, str], ...] | None:
        """:func:`_best_two` of D's agents for ``kind``, built once per kind for this D."""
        agents = self.decl.agents
        if self._best_of != (id(agents), len(agents)):  # D's agents are fixed while in use
            self._best.clear()
            self._best_of = (id(agents), len(agents))
        if kind not in self._best:
            self._best[kind] = _best_two(agents, kind)
        return self._best[kind]

    def is_stable(self, obligation_id: str) -> bool:
        """O is ε-stable iff gain(o) <= ε (icore Def. 9).

        Raises:
            StateInputError: unknown obligation.
            InterfaceError: as :meth:`gain`.
        """
        return self.gain(obligation_id) <= self.decl.parameters.epsilon

    # ------------------------------------------------------------------ evaluation
    def evaluate(self, o: Obligation) -> ObligationEval:
        """Evaluate one obligation: W membership, weight, soundness, stability, gain.

        Raises:
            InterfaceError: ``weight`` raised or returned anything but a finite number
                >= 0, or ``feasible``/``value`` misbehaved (see :meth:`gain`).
        """
        return self.evaluate_with(o, *self.interface_values(o))

    def interface_values(self, o: Obligation) -> tuple[float, float]:
        """(weight, gain) of ``o`` from D's interfaces, checked (raises InterfaceError)."""
        return checked_weight(self.decl.interfaces, o), self._gain(o)

    def evaluate_with(self, o: Obligation, w: float, g: float) -> ObligationEval:
        """Evaluate ``o`` given its checked weight and gain (calls no interface)."""
        in_w = o.required_root or o.status not in CLOSED_STATUSES
        sound = self._sound(o)
        stable = g <= self.decl.parameters.epsilon
        if (w == 0.0 and copysign(1.0, w) < 0) or (g == 0.0 and copysign(1.0, g) < 0):
            # -0.0 == 0.0: keep a negative zero out of the shared objects
            return ObligationEval(in_w=in_w, weight=w, sound=sound, stable=stable, gain=g)
        key = (in_w, sound, stable, w, g)
        ev = self._evals.get(key)
        if ev is None:
            ev = ObligationEval(in_w=in_w, weight=w, sound=sound, stable=stable, gain=g)
            if len(self._evals) < 4096:
                self._evals[key] = ev
        return ev

    # ------------------------------------------------------------------ metrics
    def refresh(
        self, touched: Iterable[str], pre: Mapping[str, tuple[float, float]] | None = None
    ) -> None:
        """Re-evaluate ``touched`` obligations and update the sums.

        ``pre`` holds checked (weight, gain) pairs computed before the log write
        (:meth:`State._prepare <icore.state.State>`); an obligation found there calls no
        interface here.

        Raises:
            InterfaceError: an obligation not in ``pre`` whose interfaces misbehave (the
                sums stay consistent).
        """
        for oid in touched:
            o = self._obligations.get(oid)
            # evaluate first: if it raises, the sums are still consistent
            if o is not None:
                iv = pre.get(oid) if pre is not None else None
                new = self.evaluate_with(o, *iv) if iv is not None else self.evaluate(o)
            old = self._eval.get(oid)
            if o is not None and old is new:
                continue  # the same (shared, frozen) evaluation: the sums do not change
            undo = self._t.undo
            if undo is not None:
                undo.append(("put", self._eval, oid, MISSING if old is None else old))
            if old is not None:
                self._sums.remove(old)
            if o is None:
                continue
            self._eval[oid] = new
            self._sums.add(new)

    def metrics(self, over: MatchedSet | None = None) -> Metrics:
        """snd, astab, cq, aggregate gain and the Prop. 4 bound (design.md 4.3).

        Args:
            over: None for W(X), maintained incrementally (O(1)); or a frozen matched set
                W_F (cost O(|W_F|), from the incrementally maintained evaluation of each
                member, so no interface is called): its members count with their frozen
                weights,
                a settled/superseded member counts as sound iff its closing assertion is
                sound, and a member no longer in Q counts as unsound and unstable.

        Raises:
            InterfaceError: with ``over``, during a replay (evaluations not yet
                refreshed), an interface misbehaved (see :meth:`evaluate`).
        """
        p = self.decl.parameters
        if over is None:
            return self._sums.metrics(p)
        w = s = st = g = _ZERO
        for oid, wf in zip(over.obligations, over.weights, strict=True):
            fw = fixed(wf)
            w += fw
            ev = self.evaluation(oid)
            if ev is None:
                continue
            if ev.sound:
                s += fw
            if ev.stable:
                st += fw
            if ev.gain > 0:
                g += fw * fixed(ev.gain)
        return make_metrics(w, s, st, g, len(over.obligations), p)

    def evaluation(self, obligation_id: str) -> ObligationEval | None:
        """The current evaluation of one obligation (None if it is not in Q).

        The incrementally maintained one, or (during a replay) a fresh one.

        Raises:
            InterfaceError: during a replay, an interface misbehaved (see :meth:`evaluate`).
        """
        o = self._obligations.get(obligation_id)
        if o is None:
            return None
        ev = self._eval.get(obligation_id) if self._t.defer is None else None
        return ev if ev is not None else self.evaluate(o)

    def recompute_metrics(self) -> Metrics:
        """Full recompute of :meth:`metrics` over W(X), from scratch (O(|Q|)).

        Raises:
            InterfaceError: an interface misbehaved (see :meth:`evaluate`).
        """
        sums = MetricSums()
        for o in self._obligations.values():
            sums.add(self.evaluate(o))
        return sums.metrics(self.decl.parameters)

    def evaluated(self) -> list[str]:
        """W(X): required roots and every obligation not settled/superseded."""
        return [oid for oid, ev in self._eval.items() if ev.in_w]

    def freeze(self, obligation_ids: Iterable[str]) -> MatchedSet:
        """Freeze a matched set W_F with the current weights (icore Sec. 4; design.md 4.4).

        Raises:
            StateInputError: an id is not an obligation.
            InterfaceError: ``weight`` raised or returned anything but a finite number >= 0.
        """
        ids: list[str] = []
        ws: list[float] = []
        for oid in dict.fromkeys(obligation_ids):
            o = self._obligations.get(oid)
            if o is None:
                raise StateInputError("unknown obligation in matched set", obligation=oid)
            ids.append(oid)
            ws.append(checked_weight(self.decl.interfaces, o))
        return MatchedSet(tuple(ids), tuple(ws))


def _best_two(agents: Mapping[str, AgentDecl], kind: str
              ) -> tuple[tuple[float, str], ...] | None:
    """The two best (value, agent id) for ``kind`` with the built-in interfaces, best first.

    A gain then costs O(1) rather than O(|agents|) (a run with 20,000 agents was
    O(steps × agents)); ties keep D's order, as the loop does. None when an agent's
    capabilities are not a plain dict or its value for ``kind`` is not a float in
    [0, 1]: the checked loop then raises as before.
    """
    found: list[tuple[float, str]] = []
    for b in agents.values():
        caps = b.capabilities
        if type(caps) is not dict:
            return None
        if kind in caps:
            v = caps[kind]
            if type(v) is not float or not 0.0 <= v <= 1.0:
                return None
            found.append((v, b.id))
    return tuple(sorted(found, key=lambda t: -t[0])[:2])
