"""Trace import: events, certificates and assertions recorded by a run (design.md 2, data flow 3).

Importers rebuild X from what a run recorded, **without** Definition 6: an imported
assertion's soundness is then computed honestly from its justification (no events, an
operation not declared for its kind, failed or revoked certificates, unsound citations
make it unsound). These functions check the inputs against X and build the log bodies;
they change nothing (the state records the bodies, the same way as any change).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from types import TracebackType
from typing import Any, Protocol

from icore._frozen import positional
from icore.state._entries import (
    AssertionImported,
    Body,
    CertificateImported,
    EventAdded,
    LogEntry,
)
from icore.state._errors import StateInputError
from icore.state._json import check_json
from icore.state._legality import check_effect_value, check_event, make_event
from icore.state._tables import Recorder
from icore.state._view import DeclarationLike, StateView
from icore.state._xmodel import (
    JSON,
    Assertion,
    AssertionKind,
    Certificate,
    CitedRecord,
    Effect,
    Event,
    EventSpec,
    Justification,
    Obligation,
)

# enum members as globals: read off the class, each costs a lookup (hot paths)
_K_NODE = AssertionKind.NODE


class ImportView(Protocol):
    """What :func:`certificate_body` and :func:`assertion_body` read of X.

    A State, or X as a batch's pending items leave it.
    """

    @property
    def decl(self) -> DeclarationLike:
        """D."""
        ...

    @property
    def events(self) -> Mapping[str, Event]:
        """G."""
        ...

    @property
    def certificates(self) -> Mapping[str, Certificate]:
        """Π's certificates."""
        ...

    @property
    def assertions(self) -> Mapping[str, Assertion]:
        """Q's assertions."""
        ...

    @property
    def obligations(self) -> Mapping[str, Obligation]:
        """Q's obligations."""
        ...

    def next_ids(self, prefix: str, count: int) -> list[str]:
        """The next ids for ``a``/``c``/``f``."""
        ...

    def is_active(self, assertion_id: str) -> bool:
        """The assertion exists and is not superseded."""
        ...

    def assertion_sound(self, assertion_id: str) -> bool:
        """Soundness of one assertion."""
        ...


def event_body(x: StateView, spec: EventSpec, eid: str,
               layouts: Callable[[Mapping[str, JSON]], Mapping[str, JSON]] | None = None,
               ) -> EventAdded:
    """The body adding ``spec`` to G as event ``eid``.

    ``layouts`` (a :class:`~icore.state._share.FieldLayouts`) builds the event's fields
    in their compact form (issue 29: memory of long imports); default a plain dict.

    Raises:
        StateInputError: undeclared type, unknown agent, missing declared field, a
            cause not in G, a reused id or non-JSON fields.
    """
    problem = check_event(spec, eid, x, set())
    if problem is not None:
        raise StateInputError(problem[1], event=eid, code=str(problem[0]))
    return EventAdded(make_event(spec, eid, x,
                                 None if layouts is None else layouts(spec.fields)))


def certificate_body(
    x: ImportView,
    validator: str,
    *,
    verdict: bool,
    version: str | None = None,
    events: Sequence[str] = (),
    records: Sequence[CitedRecord] = (),
    payload: JSON = None,
    share: Callable[[JSON], JSON] | None = None,
) -> CertificateImported:
    """The body adding a recorded certificate to Π with its recorded verdict.

    ``share`` (a :class:`~icore.state._share.ValueShare`) may return an earlier equal
    payload object in place of ``payload`` (issue 29: memory of long imports).

    Raises:
        StateInputError: undeclared validator or an event not in G.
    """
    spec = x.decl.validators.get(validator)
    if spec is None:
        raise StateInputError("undeclared validator", validator=validator)
    g = x.events
    for e in events:
        if e not in g:
            raise StateInputError("certificate cites an event not in G", event=e)
    check_json(payload, "payload")
    cert = _certificate(x.next_ids("c", 1)[0], validator, version or spec.version,
                        tuple(events), tuple(records),
                        payload if share is None else share(payload), bool(verdict), (), ())
    return CertificateImported(cert)


def assertion_body(
    x: ImportView,
    effect: Effect,
    *,
    events: Sequence[str] = (),
    operation: str | None = None,
    certificates: Sequence[str] = (),
    cites: Sequence[str] = (),
    proposer: str | None = None,
    justified: bool = True,
    checked: bool = False,
) -> AssertionImported:
    """The body adding an assertion to Q and its justification to Π.

    See :meth:`State.import_assertion <icore.state.State.import_assertion>`. ``checked``:
    the same ``operation``, ``proposer``, ``events`` and ``certificates`` were already
    checked against this X (an earlier item of an :class:`ImportBatch`; X only grew
    since), so they are not checked again.

    Raises:
        StateInputError: anything named that does not exist, or a malformed effect.
    """
    if not checked:
        _check_named(x, events, operation, certificates, proposer)
    q_asserts, q_obls = x.assertions, x.obligations
    for c in cites:
        if c not in q_asserts:
            raise StateInputError("unknown cited assertion", assertion=c)
    if effect.kind == _K_NODE:
        if effect.obligation in q_obls:
            raise StateInputError("obligation already exists", obligation=effect.obligation)
    elif effect.obligation not in q_obls:
        raise StateInputError("unknown obligation", obligation=effect.obligation)
    problem = check_effect_value(effect, x, {effect.obligation})
    if problem is not None:
        raise StateInputError(problem[1], obligation=effect.obligation, code=str(problem[0]))
    a = _assertion(
        x.next_ids("a", 1)[0],
        effect.obligation,
        effect.kind if type(effect.kind) is AssertionKind else AssertionKind(effect.kind),
        effect.key,
        effect.value,
        proposer,
        None,
        not cites or all(x.is_active(c) and x.assertion_sound(c) for c in cites),
    )
    j = (
        _justification(tuple(events), operation, tuple(certificates), tuple(cites))
        if justified
        else None
    )
    return _imported(a, j)


def _check_named(x: ImportView, events: Sequence[str], operation: str | None,
                 certificates: Sequence[str], proposer: str | None) -> None:
    """Raise unless the operation, the proposer, the events and the certificates exist."""
    if operation is not None and operation not in x.decl.operations:
        raise StateInputError("unknown operation", operation=operation)
    if proposer is not None and proposer not in x.decl.agents:
        raise StateInputError("unknown agent", agent=proposer)
    g, pi_certs = x.events, x.certificates
    for e in events:
        if e not in g:
            raise StateInputError("justification cites an event not in G", event=e)
    for c in certificates:
        if c not in pi_certs:
            raise StateInputError("unknown certificate", certificate=c)


# one object per item of a long import, built without a per-field setattr (#29)
_assertion = positional(Assertion)
_justification = positional(Justification)
_imported = positional(AssertionImported)
_certificate = positional(Certificate)


class _Union(Mapping[str, Any]):
    """Read-only union of a batch's pending items and X's (pending first)."""

    __slots__ = ("_a", "_b")

    def __init__(self, a: Mapping[str, Any], b: Mapping[str, Any]) -> None:
        self._a, self._b = a, b

    def __getitem__(self, key: str) -> Any:
        if key in self._a:
            return self._a[key]
        return self._b[key]

    def __contains__(self, key: object) -> bool:
        return key in self._a or key in self._b

    def __iter__(self) -> Iterator[str]:
        yield from self._a
        yield from (k for k in self._b if k not in self._a)

    def __len__(self) -> int:
        return len(self._a) + sum(1 for k in self._b if k not in self._a)


class _BatchView:
    """X as the pending bodies of an :class:`ImportBatch` leave it, for the import checks.

    Only what :func:`certificate_body` and :func:`assertion_body` read: D, the clock, G,
    Π's certificates, Q's assertions and obligations (pending ones included) and the next
    ids. Citations are read from X itself (a batch commits its pending bodies before an
    assertion that cites anything, so they are always X's).
    """

    def __init__(self, x: StateView) -> None:
        self._x = x
        self.decl = x.decl
        self.clock = x.clock
        self.pending_certs: dict[str, Certificate] = {}
        self.pending_assertions: dict[str, Assertion] = {}
        self.pending_obligations: dict[str, Assertion] = {}  # id -> its node assertion
        self.events: Mapping[str, Event]
        self.events = x.events
        self.certificates = _Union(self.pending_certs, x.certificates)
        self.assertions = _Union(self.pending_assertions, x.assertions)
        self.obligations = _Union(self.pending_obligations, x.obligations)

    def next_ids(self, prefix: str, count: int) -> list[str]:
        """The next ``count`` ids for ``a``/``c``/``f``, after the pending items' ids."""
        n = (len(self.pending_assertions) if prefix == "a" else
             len(self.pending_certs) if prefix == "c" else 0)
        if not n:
            return self._x.next_ids(prefix, count)
        return self._x.next_ids(prefix, n + count)[n:]

    def is_active(self, assertion_id: str) -> bool:
        """X's answer (citations are checked against X itself)."""
        return self._x.is_active(assertion_id)

    def assertion_sound(self, assertion_id: str) -> bool:
        """X's answer (citations are checked against X itself)."""
        return self._x.assertion_sound(assertion_id)


class ImportBatch:
    """Imported certificates and assertions recorded as one change (trusted-import path).

    Each item is checked exactly as :meth:`State.import_certificate
    <icore.state.State.import_certificate>` / :meth:`State.import_assertion
    <icore.state.State.import_assertion>` check it, against X as the items before it in
    the batch leave it (so an assertion may name an obligation or a certificate created
    earlier in the batch). :meth:`commit` records them in one log write; X ends exactly
    as after the same calls one by one (each touched obligation is evaluated once, as
    the last item touching it leaves it, instead of once per item; interfaces are called
    once per obligation). Atomic: if an item is refused or an interface misbehaves,
    nothing of the batch is written. An assertion that cites assertions first commits
    the items before it (the citations are then checked against X itself). A context
    manager: the items of its block are committed when the block ends without an
    exception.

    Built by :meth:`State.import_batch <icore.state.State.import_batch>`.
    """

    def __init__(self, x: StateView, record: Recorder,
                 share: Callable[[JSON], JSON] | None = None) -> None:
        self._x = x
        self._record = record
        self._share = share  # equal small payloads as one object (ValueShare)
        self._bodies: list[Body] = []
        self._pending: _BatchView | None = None  # built on the first item
        self._last_j: Justification | None = None  # shared by equal justifications
        self._checked: tuple[Any, ...] | None = None  # what the last item named: it exists

    @property
    def _view(self) -> _BatchView:
        if self._pending is None:
            self._pending = _BatchView(self._x)
        return self._pending

    def __len__(self) -> int:
        return len(self._bodies)

    def __enter__(self) -> ImportBatch:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if exc_type is None:  # an exception in the block writes nothing
            self.commit()

    def import_certificate(
        self,
        validator: str,
        *,
        verdict: bool,
        version: str | None = None,
        events: Sequence[str] = (),
        records: Sequence[CitedRecord] = (),
        payload: JSON = None,
    ) -> Certificate:
        """Add a recorded certificate to the batch (see ``State.import_certificate``).

        Raises:
            StateInputError: undeclared validator or an event not in G.
        """
        body = certificate_body(self._view, validator, verdict=verdict, version=version,
                                events=events, records=records, payload=payload,
                                share=self._share)
        c = body.certificate
        self._view.pending_certs[c.id] = c
        self._bodies.append(body)
        return c

    def import_assertion(
        self,
        effect: Effect,
        *,
        events: Sequence[str] = (),
        operation: str | None = None,
        certificates: Sequence[str] = (),
        cites: Sequence[str] = (),
        proposer: str | None = None,
        justified: bool = True,
    ) -> Assertion:
        """Add an assertion to the batch (see ``State.import_assertion``).

        Raises:
            StateInputError: anything named that does not exist (in X or earlier in the
                batch), or a malformed effect.
            InterfaceError: only when ``cites`` is not empty and the items before it are
                committed first (see :meth:`commit`).
            LogError: likewise.
        """
        if cites and self._bodies:
            self.commit()
        # the items of a batch usually name the same events, operation and certificates:
        # what the previous item named exists (X only grows while a batch is open)
        named = (tuple(events), operation, tuple(certificates), proposer)
        body = assertion_body(self._view, effect, events=events, operation=operation,
                              certificates=certificates, cites=cites, proposer=proposer,
                              justified=justified, checked=named == self._checked)
        self._checked = named
        j, last = body.justification, self._last_j
        if j is not None:  # the items of a batch usually share one (frozen): one object
            if last is not None and j == last:
                body = AssertionImported(body.assertion, last)
            else:
                self._last_j = j
        a = body.assertion
        self._view.pending_assertions[a.id] = a
        if a.kind == _K_NODE:
            self._view.pending_obligations[a.obligation] = a
        self._bodies.append(body)
        return a

    def commit(self) -> list[LogEntry]:
        """Record the pending items as one change and start an empty batch.

        Returns:
            The log entries written (one per item), in order.

        Raises:
            InterfaceError: an interface misbehaved on a touched obligation (nothing of
                the batch written, X unchanged).
            LogError: the log refused the entries (nothing written, X unchanged).
        """
        bodies, self._bodies = self._bodies, []
        self._pending = None
        self._checked = None
        if not bodies:
            return []
        return self._record(bodies, batch=True)
