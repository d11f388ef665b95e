"""The writer marker in a trace's header: what its writer digests and chains (#29).

The digests (:mod:`icore._line_digest`) and the chain (:mod:`icore._line_chain`) show a
line edited, lost or moved, but not a line whose digest was dropped with its chain link
when no other line tells the audit it should have one: a writer that digests its
decisions alone (through the public ``DecisionEntry.to_dict(digest=True)``) cannot be
told from an edit that stripped the event lines' digests. So every icore JSONL writer
(:class:`~icore.integrations.RunRecorder`, and the MCP gateway through it) says in its
header what it writes::

    {"run": {..., "icore": {"v": 1, "writer": "<its chain id>",
                            "digests": ["decisions", "events", "records", "lines"],
                            "chain": true, "seal": true}},
     "run_digest": "<the header's whole-line digest>",
     "digest": "<sha256 of the marker>", "chain": {"writer": ..., "seq": 1, "prev": ""}}

``digests``: every PlanFence decision line carries its digest, every human-answer /
tool-outcome line (:func:`icore._line_digest.guarded`) its digest, every record line its
id; ``lines`` (QA qa-new14 S3): every line (model turns, plans, the header's run
fields...) its whole-line digest (:mod:`icore._line_seal`); ``chain``: each of those
lines (and the header) its link in the writer's chain;
``seal``: every end line (``termination``, ``terminates: true``) its ``chain_end``. The
header is the first line of the writer's chain (its ``digest``: :func:`mark_digest`),
so the marker cannot be dropped or edited while the chain stays whole.

A trace whose header carries the marker and breaks one of its promises (a decision or
guarded line without a digest, an end line without a seal, a malformed or edited
marker) was edited: every protected action of the run is ``INVALID`` and a warning
names each line (:class:`MarkCheck`). A trace without the marker (written before it, by
hand, by another writer) keeps the earlier reading: a line's missing digest is an edit
only when the trace's other lines of its kind carry one. Like the chain, the marker is
no signature: stripping it with every digest and link (back to a trace written before
#29) is read as such a trace, with its notes. Pure: no I/O.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Collection, Mapping, Sequence
from typing import Any

MARK = "icore"
"""The key of the marker in the header's ``run`` object."""
VERSION = 1
"""The marker's version written here (a later one is read with these rules, noted)."""
DIGESTS = ("decisions", "events", "records", "lines")
"""What an icore writer digests (every line of each kind; ``lines``: every line, over all
its fields, :mod:`icore._line_seal`)."""
EARLIER_DIGESTS = ("decisions", "events", "records")
"""What icore writers digested before ``lines`` (their traces are read by those promises)."""

_DOMAIN = b"icore.writer-mark.v1\n"


def writer_mark(writer: str, digests: Sequence[str] = DIGESTS) -> dict[str, Any]:
    """The marker an icore writer with chain id ``writer`` puts in its header.

    ``digests``: what it digests (:data:`EARLIER_DIGESTS`: the marker of an icore version
    before whole-line digests, to recognise its traces).
    """
    return {"v": VERSION, "writer": writer, "digests": list(digests), "chain": True,
            "seal": True}


def mark_digest(mark: Any) -> str:
    """sha256 hex (64 digits) of a marker as canonical JSON (never raises)."""
    try:
        text = json.dumps(mark, sort_keys=True, separators=(",", ":"), ensure_ascii=True,
                          allow_nan=False, default=repr)
    except (TypeError, ValueError, RecursionError):
        text = repr(mark)
    return hashlib.sha256(_DOMAIN + text.encode("ascii", "backslashreplace")).hexdigest()


def marked_header(run: Mapping[str, Any], writer: str) -> dict[str, Any]:
    """The header line ``{"run": {...run, "icore": marker}, "digest": ...}`` (no chain yet).

    The writer's chain (:class:`icore._line_chain.ChainWriter`) gives it its link: it
    carries a digest, so it is the chain's first line.
    """
    mark = writer_mark(writer)
    return {"run": {**run, MARK: mark}, "digest": mark_digest(mark)}


class MarkCheck:
    """Checks a trace against its header's marker, as the lines are read (#29).

    :meth:`header` reads the marker (none: :attr:`active` stays False and nothing is
    checked); :meth:`missing` notes a line that breaks a promise; :meth:`result` gives
    why the run's actions are ``INVALID`` and the warnings. Memory: one entry per line
    that breaks a promise (a clean trace: none).
    """

    def __init__(self, file: str) -> None:
        self.file = file
        self.active = False
        """Whether the header carries a marker, or a writer's chain shows one
        (:meth:`writers`): its promises are checked."""
        self.promised: frozenset[str] = frozenset()
        """What the marker promises: ``decisions``, ``events``, ``records``, ``chain``,
        ``seal`` (all of them for a malformed marker: fail closed)."""
        self._whys: list[str] = []
        self._lacking: list[tuple[str, str]] = []  # (kind, why) per line lacking one
        self._note: str | None = None

    def header(self, n: int, line: Mapping[str, Any]) -> None:
        """The header line ``n`` (a ``{"run": {...}}`` object) as read."""
        run = line.get("run")
        if not isinstance(run, Mapping) or MARK not in run:
            return
        self.active = True
        mark = run[MARK]
        full = frozenset((*DIGESTS, "chain", "seal"))
        if not isinstance(mark, Mapping):
            self.promised = full
            self._whys.append(f"line {n}: the header's writer marker ({MARK!r}) is not an "
                              "object")
            return
        v, digests = mark.get("v"), mark.get("digests")
        if type(v) is not int or v < 1 or not isinstance(digests, list) \
                or not all(isinstance(x, str) for x in digests) \
                or not isinstance(mark.get("chain"), bool) \
                or not isinstance(mark.get("seal"), bool):
            self.promised = full
            self._whys.append(f"line {n}: the header's writer marker is malformed (v: an "
                              "integer >= 1, digests: a list of strings, chain and seal: "
                              "booleans)")
            return
        self.promised = frozenset(digests) | {k for k in ("chain", "seal") if mark[k]}
        if v > VERSION:
            self._note = (f"{self.file}: note: its header's writer marker is version {v} "
                          f"(this icore reads version {VERSION}): checked by the "
                          f"version-{VERSION} rules")
        got = line.get("digest")
        if got != mark_digest(mark):
            why = ("carries no digest" if got is None else "does not match its digest")
            self._whys.append(f"line {n}: the header's writer marker {why} (the header "
                              "was edited)")
        elif "chain" in self.promised and line.get("chain") is None:
            self._whys.append(f"line {n}: the header carries no chain link although its "
                              "writer marker promises one (its link was removed)")

    def writers(self, marked: Collection[str], lined: Collection[str] = ()) -> None:
        """The writers whose chain shows their marker (:attr:`icore._line_chain.ChainCheck.marked`).

        One is enough to hold the trace to the version-1 promises when its header carries
        no marker (the marker stripped while the chain stayed, or a marked writer's lines
        appended to a file with another header). ``lined``: those of them whose marker
        promises whole-line digests (:attr:`icore._line_chain.ChainCheck.lined`).
        """
        if marked and not self.active:
            self.active = True
            self.promised = frozenset((*(DIGESTS if lined else EARLIER_DIGESTS), "chain",
                                       "seal"))

    def missing(self, n: int | str, kind: str, what: str) -> None:
        """Line ``n`` lacks ``what`` (a digest, a seal) a marker would promise for ``kind``.

        ``kind``: ``decisions``, ``events`` or ``seal``; it counts at :meth:`result` only
        when the marker promises it (a trace without one: never).
        """
        place = n if isinstance(n, str) else f"line {n}"
        self._lacking.append((kind, f"{place} carries no {what} although the writer "
                              "marker promises one on every such line (it was stripped: "
                              "the line may have been edited)"))

    def lines(self, decisions: Sequence[tuple[str, Any]],
              events: Sequence[tuple[Any, ...]]) -> tuple[str | None, tuple[str, ...]]:
        """:meth:`result`, after noting the undigested decision and guarded lines.

        Args:
            decisions: ``(field, recorded digest or None)`` per decision line (``field``
                as ``line 4.planfence.decision``).
            events: ``(line number, action, recorded digest or None, ...)`` per guarded
                line (:func:`icore._line_digest.checked_line`).
        """
        if not self.active:
            return self.result()
        for field, got in decisions:
            if got is None:
                self.missing(field.split(".", 1)[0], "decisions", "digest (a decision line)")
        for n, action, got, *_ in events:
            if got is None:
                self.missing(n, "events", f"digest (a human-answer / tool-outcome line of "
                             f"{action!r})")
        return self.result()

    def result(self) -> tuple[str | None, tuple[str, ...]]:
        """Why every protected action is ``INVALID``, and the warnings.

        ``(why, warnings)``: ``why`` None when no promise is broken; one warning per
        broken promise (and the note on a later marker version).
        """
        note = (self._note,) if self._note else ()
        if self.active:
            self._whys += [why for kind, why in self._lacking if kind in self.promised]
        self._lacking.clear()
        if not self._whys:
            return None, note
        return self._whys[0], (*note, *(f"{self.file}: {why}; every protected action of "
                                        "the run is INVALID (the trace breaks what its "
                                        "writer marker promises)" for why in self._whys))


__all__ = ["DIGESTS", "EARLIER_DIGESTS", "MARK", "VERSION", "MarkCheck", "mark_digest",
           "marked_header", "writer_mark"]
