"""Where flags were raised and which notes a trace import kept (read lazily).

:class:`FlagPlaces` maps each flag to the step it was raised at; :class:`NoteLog` is the
import's log sink; :class:`OutputsSince` the outputs since the last ledger and
:class:`DigestSet` an agent's output digests. Part of
:mod:`icore.adapters._trace_audit` (split for size, issue 26).
"""

from __future__ import annotations

from array import array
from bisect import bisect_left
from collections.abc import Iterator, Mapping, Sequence
from typing import ClassVar

from icore.adapters._results import (
    BuiltOnRead,
    Finding,
    FlagPlace,
)
from icore.state import (
    AssertionImported,
    CertificateImported,
    Committed,
    EntryKind,
    EventAdded,
    FlagRaised,
    LogEntry,
    Note,
    ProposalRecorded,
)

_QUIET = frozenset({AssertionImported, CertificateImported})
"""Body types neither :class:`FlagPlaces` nor :class:`NoteLog` reads (exact types)."""


class FlagPlaces:
    """Where in a run each hard flag was raised, tracked from the log entries.

    Tracked as the entries are appended, so a report can name the step and agent of a flag
    without the log.
    """

    def __init__(self) -> None:
        self.proposals = 0
        self.last: str | None = None
        self.step_of: dict[str, int] = {}
        self.at: dict[str, FlagPlace] = {}

    def feed(self, entries: Sequence[LogEntry]) -> None:
        """Account for ``entries`` (in log order)."""
        for e in entries:
            b = e.body
            if type(b) in _QUIET:  # most entries of an import: nothing to account for
                continue
            if isinstance(b, ProposalRecorded):
                self.proposals += 1
                steps = [ev.fields.get("step") for ev in b.proposal.events]
                first = next((s for s in steps if isinstance(s, int) and s >= 0), None)
                if b.proposal.id is not None and first is not None:
                    self.step_of[b.proposal.id] = first
            elif isinstance(b, EventAdded):
                self.last = b.event.id
            elif isinstance(b, Committed) and b.events:
                self.last = b.events[-1].id
            elif isinstance(b, FlagRaised):
                p = b.flag.proposal
                self.at[b.flag.id] = (self.proposals, self.last,
                                      self.step_of.get(p) if p is not None else None)


class NoteLog:
    """Where an imported run's log goes: only its notes (diagnoses) are kept.

    An audit of a recorded run needs X itself, not its history: keeping every entry in
    memory doubled the footprint of a long run (docs/audit.md "Cost"), so the state
    keeps no entries and this log keeps only the ``note`` entries (what the audit
    concluded), in order. A ``diagnosis`` note of the run's own diagnoses (``ref`` in
    ``diagnoses``) is kept as its place (seq, time) only, and rebuilt from its
    :class:`Finding` when read (:meth:`Finding.note_payload`): the diagnosis is not
    kept twice.
    """

    def __init__(self, diagnoses: Mapping[str, Finding] | None = None) -> None:
        self._kept: list[LogEntry | tuple[int, float, str]] = []
        self._diagnoses: Mapping[str, Finding] = diagnoses if diagnoses is not None else {}
        self.places = FlagPlaces()

    def append(self, entries: Sequence[LogEntry]) -> None:
        """Keep the note entries of ``entries``; track where flags are raised."""
        for e in entries:
            b = e.body
            if type(b) in _QUIET:  # most entries of an import
                continue
            if isinstance(b, Note):
                ref = b.ref
                if b.kind == "diagnosis" and ref is not None and ref in self._diagnoses:
                    self._kept.append((e.seq, e.t_ms, ref))
                else:
                    self._kept.append(e)
        self.places.feed(entries)

    @property
    def notes(self) -> NoteEntries:
        """The kept note entries, in order (built on access)."""
        return NoteEntries(self._kept, self._diagnoses)

    def entries(self) -> list[LogEntry]:
        """The kept note entries, in order."""
        return list(self.notes)


class NoteEntries(BuiltOnRead[LogEntry]):
    """The note entries a :class:`NoteLog` kept, read-only.

    A diagnosis note is rebuilt from its :class:`Finding` each time it is read.
    """

    __slots__ = ("_diagnoses", "_kept")

    def __init__(self, kept: Sequence[LogEntry | tuple[int, float, str]],
                 diagnoses: Mapping[str, Finding]) -> None:
        self._kept = kept
        self._diagnoses = diagnoses

    def __len__(self) -> int:
        return len(self._kept)

    def _at(self, i: int) -> LogEntry:
        return self._entry(self._kept[i])

    def _entry(self, k: LogEntry | tuple[int, float, str]) -> LogEntry:
        if isinstance(k, LogEntry):
            return k
        seq, t_ms, ref = k
        body = Note("diagnosis", self._diagnoses[ref].note_payload(), ref)
        return LogEntry(seq, t_ms, EntryKind.NOTE, body)


class OutputsSince:
    """The outputs submitted since the last ledger: (event id, passed, repeat) rows.

    Kept as a list of event ids and a byte of flags each (the ids are X's own strings)
    instead of a 3-tuple each: a run with no ledger keeps every output here (issue 29).
    """

    __slots__ = ("_flags", "events")

    def __init__(self) -> None:
        self.events: list[str] = []
        """The outputs' event ids, in order."""
        self._flags = bytearray()

    def append(self, event: str, passed: bool, repeat: bool) -> None:
        """Add one output: its event, whether its certificate passed, whether it repeats."""
        self.events.append(event)
        self._flags.append((1 if passed else 0) | (2 if repeat else 0))

    def rows(self) -> Iterator[tuple[str, bool, bool]]:
        """``(event, passed, repeat)`` per output, in order."""
        return ((e, bool(f & 1), bool(f & 2)) for e, f in zip(self.events, self._flags,
                                                             strict=True))


class DigestSet:
    """A set of output digests (16 lowercase hex digits) in 8 bytes each (issue 29).

    One agent's digests seen since its last new instruction: on a long run with no
    instruction that is every output it made, so a ``set`` (about 60 bytes an entry)
    is kept as a sorted ``array('Q')`` of the digests' values plus a set of the latest
    ones, merged into it every :data:`MERGE_AT` additions; any other string is kept as
    is. Reads as the set of strings it replaces (``in``, ``add``, ``discard``, ``len``).
    """

    MERGE_AT: ClassVar[int] = 2048

    __slots__ = ("_new", "_old", "_other")

    def __init__(self) -> None:
        self._old: array[int] = array("Q")
        self._new: set[int] = set()
        self._other: set[str] = set()

    @staticmethod
    def _key(digest: str) -> int | None:
        if len(digest) != 16:
            return None
        try:
            v = int(digest, 16)
        except ValueError:
            return None
        return v if f"{v:016x}" == digest else None  # no sign, "0x", "_", upper case

    def _has(self, k: int) -> bool:
        if k in self._new:
            return True
        old = self._old
        i = bisect_left(old, k)
        return i < len(old) and old[i] == k

    def __contains__(self, digest: object) -> bool:
        k = self._key(digest) if isinstance(digest, str) else None
        return digest in self._other if k is None else self._has(k)

    def add(self, digest: str) -> None:
        """Add ``digest``."""
        k = self._key(digest)
        if k is None:
            self._other.add(digest)
        elif not self._has(k):
            self._new.add(k)
            if len(self._new) >= self.MERGE_AT:
                self._old = array("Q", sorted((*self._old, *self._new)))
                self._new.clear()

    def discard(self, digest: str) -> None:
        """Remove ``digest`` if it is there."""
        k = self._key(digest)
        if k is None:
            self._other.discard(digest)
        elif k in self._new:
            self._new.discard(k)
        else:
            old = self._old
            i = bisect_left(old, k)
            if i < len(old) and old[i] == k:
                del old[i]

    def __len__(self) -> int:
        return len(self._old) + len(self._new) + len(self._other)
