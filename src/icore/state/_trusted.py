"""The trusted path into X: importing a recorded run, notes and flags (design.md 4.2, 4.4).

:class:`TrustedImport` is the part of :class:`~icore.state.State` that adds to X what
was observed rather than proposed: events of G, certificates and assertions of a
recorded run (one by one, or as one batch: :class:`~icore.state._trusted_import.ImportBatch`,
issue 29), hard flags and their resolutions, and the notes of iCORE-Audit (diagnosis,
feedback, recovery). Definition 6 does not run here; each item is checked for what it
names (:mod:`icore.state._trusted_import`), and soundness is computed honestly afterwards.
"""

from __future__ import annotations

from collections.abc import Sequence

from icore.state._entries import FlagRaised, FlagResolved, LogEntry, Note
from icore.state._errors import StateInputError
from icore.state._json import check_json
from icore.state._share import FieldLayouts, ValueShare
from icore.state._tables import Recorder
from icore.state._trusted_import import ImportBatch, assertion_body, certificate_body, event_body
from icore.state._view import StateView
from icore.state._xmodel import (
    JSON,
    Assertion,
    Certificate,
    CitedRecord,
    Effect,
    Event,
    EventSpec,
    FlagKind,
    HardFlag,
)


class TrustedImport:
    """Adds observed items to X (a part of :class:`~icore.state.State`).

    Args:
        x: the state (what the items are checked against).
        record: the state's recorder (one log transaction per call or batch).
    """

    __slots__ = ("_layouts", "_record", "_share", "_x")

    def __init__(self, x: StateView, record: Recorder) -> None:
        self._x = x
        self._record = record
        # equal small certificate payloads imported as one object (issue 29)
        self._share = ValueShare()
        # events' fields: shared keys, a tuple of values
        self._layouts: FieldLayouts[str] = FieldLayouts()

    def add_event(self, spec: EventSpec) -> Event:
        """Append an observed event to G (trace import).

        Raises:
            StateInputError: undeclared type, unknown agent, missing declared field, a
                cause not in G, a reused id or non-JSON fields.
        """
        eid = spec.id
        if not eid:
            events = self._x.events
            n = len(events) + 1
            while f"e{n}" in events:
                n += 1
            eid = f"e{n}"
        body = event_body(self._x, spec, eid, self._layouts)
        self._record([body])
        return body.event

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
        """Add a recorded certificate to Π with its recorded verdict (trace import).

        Raises:
            StateInputError: undeclared validator or an event not in G.
        """
        body = certificate_body(self._x, validator, verdict=verdict, version=version,
                                events=events, records=records, payload=payload,
                                share=self._share)
        self._record([body])
        return body.certificate

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
        """Add an assertion and its justification **without** Definition 6 (see ``State``).

        Raises:
            StateInputError: anything named that does not exist, or a malformed effect.
            InterfaceError: ``weight``/``value``/``feasible`` misbehaved on the obligation
                as the assertion would leave it; nothing is written and X is unchanged.
        """
        body = assertion_body(self._x, effect, events=events, operation=operation,
                              certificates=certificates, cites=cites, proposer=proposer,
                              justified=justified)
        self._record([body])
        return body.assertion

    def import_batch(self) -> ImportBatch:
        """Many certificates and assertions as one change (see ``State.import_batch``).

        Returns:
            The batch, a context manager: items added in its block are recorded when the
            block ends without an exception (an exception writes nothing).

        Raises:
            StateInputError: an item names something that does not exist.
            InterfaceError: an interface misbehaved on a touched obligation.
            LogError: the log refused the entries.
        """
        return ImportBatch(self._x, self._record, self._share)

    def raise_flag(
        self,
        kind: FlagKind,
        *,
        obligations: Sequence[str] = (),
        assertions: Sequence[str] = (),
        proposal: str | None = None,
        proposer: str | None = None,
        certificates: Sequence[str] = (),
        detail: str = "",
    ) -> HardFlag:
        """Raise a hard flag directly (iCORE-Audit, importers)."""
        flag = HardFlag(
            id=self._x.next_ids("f", 1)[0],
            kind=FlagKind(kind),
            obligations=tuple(obligations),
            assertions=tuple(assertions),
            proposal=proposal,
            proposer=proposer,
            certificates=tuple(certificates),
            detail=detail,
        )
        self._record([FlagRaised(flag)])
        return flag

    def resolve_flag(self, flag_id: str, *, by: str | None = None, note: str = "") -> LogEntry:
        """Mark a hard flag resolved (e.g. by an accepted recovery).

        Raises:
            StateInputError: unknown or already resolved flag.
        """
        if flag_id not in self._x.flags:
            raise StateInputError("unknown flag", flag=flag_id)
        if self._x.flag_resolution(flag_id) is not None:
            raise StateInputError("flag already resolved", flag=flag_id)
        return self._record([FlagResolved(flag_id, by, note)])[0]

    def record_note(self, kind: str, payload: JSON = None, *, ref: str | None = None) -> LogEntry:
        """Record a diagnosis / feedback / recovery / failure entry (icore Sec. 4).

        Raises:
            StateInputError: empty ``kind`` or a payload that is not JSON.
        """
        if not kind:
            raise StateInputError("note kind must be non-empty")
        check_json(payload, "payload")
        return self._record([Note(kind, payload, ref)])[0]
