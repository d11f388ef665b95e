"""Trace import: events, certificates and assertions recorded by a run (design.md 2, data flow 3).

Importers rebuild X from what a run recorded, **without** Definition 6: an imported
assertion's soundness is then computed honestly from its justification (no events, an
operation not declared for its kind, failed or revoked certificates, unsound citations
make it unsound). These functions check the inputs against X and build the log bodies;
they change nothing (the state records the bodies, the same way as any change).
"""

from __future__ import annotations

from collections.abc import Sequence

from icore.state._entries import AssertionImported, CertificateImported, EventAdded
from icore.state._errors import StateInputError
from icore.state._json import check_json
from icore.state._legality import check_effect_value, check_event, make_event
from icore.state._model import (
    JSON,
    Assertion,
    AssertionKind,
    Certificate,
    CitedRecord,
    Effect,
    EventSpec,
    Justification,
)
from icore.state._view import StateView


def event_body(x: StateView, spec: EventSpec, eid: str) -> EventAdded:
    """The body adding ``spec`` to G as event ``eid``.

    Raises:
        StateInputError: undeclared type, unknown agent, missing declared field, a
            cause not in G, a reused id or non-JSON fields.
    """
    problem = check_event(spec, eid, x, set())
    if problem is not None:
        raise StateInputError(problem[1], event=eid, code=str(problem[0]))
    return EventAdded(make_event(spec, eid, x))


def certificate_body(
    x: StateView,
    validator: str,
    *,
    verdict: bool,
    version: str | None = None,
    events: Sequence[str] = (),
    records: Sequence[CitedRecord] = (),
    payload: JSON = None,
) -> CertificateImported:
    """The body adding a recorded certificate to Π with its recorded verdict.

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
    cert = Certificate(
        id=x.next_ids("c", 1)[0],
        validator=validator,
        version=version or spec.version,
        events=tuple(events),
        records=tuple(records),
        payload=payload,
        verdict=bool(verdict),
    )
    return CertificateImported(cert)


def assertion_body(
    x: StateView,
    effect: Effect,
    *,
    events: Sequence[str] = (),
    operation: str | None = None,
    certificates: Sequence[str] = (),
    cites: Sequence[str] = (),
    proposer: str | None = None,
    justified: bool = True,
) -> AssertionImported:
    """The body adding an assertion to Q and its justification to Π.

    See :meth:`State.import_assertion <icore.state.State.import_assertion>`.

    Raises:
        StateInputError: anything named that does not exist, or a malformed effect.
    """
    if operation is not None and operation not in x.decl.operations:
        raise StateInputError("unknown operation", operation=operation)
    if proposer is not None and proposer not in x.decl.agents:
        raise StateInputError("unknown agent", agent=proposer)
    g, pi_certs, q_asserts, q_obls = x.events, x.certificates, x.assertions, x.obligations
    for e in events:
        if e not in g:
            raise StateInputError("justification cites an event not in G", event=e)
    for c in certificates:
        if c not in pi_certs:
            raise StateInputError("unknown certificate", certificate=c)
    for c in cites:
        if c not in q_asserts:
            raise StateInputError("unknown cited assertion", assertion=c)
    if effect.kind == AssertionKind.NODE:
        if effect.obligation in q_obls:
            raise StateInputError("obligation already exists", obligation=effect.obligation)
    elif effect.obligation not in q_obls:
        raise StateInputError("unknown obligation", obligation=effect.obligation)
    problem = check_effect_value(effect, x, {effect.obligation})
    if problem is not None:
        raise StateInputError(problem[1], obligation=effect.obligation, code=str(problem[0]))
    a = Assertion(
        id=x.next_ids("a", 1)[0],
        obligation=effect.obligation,
        kind=AssertionKind(effect.kind),
        key=effect.key,
        value=effect.value,
        proposer=proposer,
        proposal=None,
        cited_sound=all(x.is_active(c) and x.assertion_sound(c) for c in cites),
    )
    j = (
        Justification(tuple(events), operation, tuple(certificates), tuple(cites))
        if justified
        else None
    )
    return AssertionImported(a, j)
