"""A chain over each writer's digested trace lines, so a lost or moved line is seen (#29).

A line's digest (:mod:`icore._line_digest`, :meth:`icore.fence.DecisionEntry.digest`, a
record's id) shows an edit of that line, not its absence: a deleted, reordered or
duplicated line leaves every remaining line matching its own digest. So each writer (one
:class:`~icore.integrations.RunRecorder`, one MCP gateway run; several may append to one
file) numbers the digested lines it writes and links each to its previous one::

    "chain": {"writer": "<id>", "seq": 3, "prev": "<link of its seq 2>"}

with ``link = sha256("icore.chain.v1" | writer | seq | prev | the line's digest)``
(:func:`link`). A run's end line (``termination``) carries, per writer, what that
writer wrote in the whole file: ``"chain_end": {"writer", "lines", "last"}``, so lines
cut off after it (or before it) are seen; a run without an end line is reported as not
ended, and its last lines can be cut off unseen (the audit says so). Each writer's chain
is checked on its own (:func:`chain_problems`), so honest writers appending to one file
in any interleaving never break one another's.

A plain hash chain, not a signature: it catches a line removed, moved or repeated by a
hand or a tool that does not rewrite the links after it; a writer who recomputes every
link (or adds lines under a new writer id) is not caught. Pure: no I/O.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from icore._writer_mark import DIGESTS, EARLIER_DIGESTS, mark_digest, writer_mark

_DOMAIN = b"icore.chain.v1\n"
CHAIN = "chain"
"""The key of a line's chain link."""
CHAIN_END = "chain_end"
"""The key of an end line's seal (what its writer wrote in the whole file)."""


def link(writer: str, seq: int, prev: str, digest: str) -> str:
    """sha256 hex (64 digits) binding a line's digest to its place in its writer's chain."""
    text = f"{writer}\n{seq}\n{prev}\n{digest}"
    return hashlib.sha256(_DOMAIN + text.encode("utf-8", "backslashreplace")).hexdigest()


def line_digest_of(line: Mapping[str, Any]) -> Any:
    """The digest a trace line carries: an event's or decision's ``digest``, a record's id.

    A PlanFence line's own top-level ``digest`` (:func:`icore._line_seal.sealed`) first.
    None for a line that carries none (a plain event line, a header).
    """
    pf = line.get("planfence")
    if isinstance(pf, Mapping) and "agent" not in line and not isinstance(
            line.get("digest"), str):  # a sealed PlanFence line: its own digest
        d = pf.get("decision")
        if isinstance(d, Mapping):
            return d.get("digest")
        r = pf.get("record")
        return r.get("id") if isinstance(r, Mapping) else None
    return line.get("digest")


class ChainWriter:
    """One writer's chain: :meth:`chained` gives each digested line its link, in order.

    Args:
        writer: the writer's id (unique among the writers of one file: a random hex id).

    Not thread-safe: the recorders call it under their own lock.
    """

    def __init__(self, writer: str) -> None:
        self.writer = writer
        self.seq = 0
        """How many lines the chain holds so far."""
        self.last = ""
        """The link of its last line ("" before the first)."""

    def chained(self, line: Mapping[str, Any]) -> Mapping[str, Any]:
        """``line`` with its ``chain`` when it carries a digest (a fresh dict), else itself.

        The line's digest must be set already (:func:`icore._line_digest.with_digest`,
        a decision's ``to_dict(digest=True)``).
        """
        got = line_digest_of(line)
        if not isinstance(got, str):
            return line
        self.seq += 1
        out = dict(line)
        out[CHAIN] = {"writer": self.writer, "seq": self.seq, "prev": self.last}
        self.last = link(self.writer, self.seq, self.last, got)
        return out

    def seal(self) -> dict[str, Any]:
        """The ``chain_end`` value an end line carries: what this writer wrote so far."""
        return {"writer": self.writer, "lines": self.seq, "last": self.last}


def chain_lines(writer: str, lines: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """``lines`` (a whole file's, in file order) chained, every end line sealed.

    An end line (``kind`` ``termination``) gets ``chain_end``: the writer's totals over
    all of ``lines`` (the end line may come before the writer's last line, as the MCP
    gateway's PlanFence lines follow its events); with no end line, a pause that is the
    last event line gets it (:func:`seal_points`).
    """
    chain = ChainWriter(writer)
    out = [chain.chained(x) for x in lines]
    seal = chain.seal()
    at = seal_points(out)
    return [{**x, CHAIN_END: seal} if i in at else x for i, x in enumerate(out)]


def seal_points(lines: Sequence[Mapping[str, Any]]) -> set[int]:
    """The indexes of ``lines`` that carry the writer's seal when the file is closed.

    Every end line (:func:`is_end`); with none, the last event line when it is a pause
    (``pause: true``: a run closed while it waits for a human), so a run closed at a
    pause is told from one whose process stopped while it waited (no seal: not ended,
    QA qa-new16 S3).
    """
    ends = {i for i, x in enumerate(lines) if is_end(x)}
    if ends:
        return ends
    last = next((i for i in range(len(lines) - 1, -1, -1) if "agent" in lines[i]), None)
    return {last} if last is not None and lines[last].get("pause") is True else set()


def is_end(line: Mapping[str, Any]) -> bool:
    """Whether an event line ends its writer's lines, sealed with its ``chain_end``.

    A ``termination``, ``terminates: true``, or ``stopped: true`` (the run stopped with an
    error: its last line, sealed though the run did not end, QA qa-new17c #5).
    """
    return "agent" in line and (line.get("kind") == "termination"
                                or line.get("terminates") is True
                                or line.get("stopped") is True)


def header_link(writer: str, digests: Sequence[str] = DIGESTS) -> str:
    """The link of ``writer``'s marked header (:func:`icore._writer_mark.marked_header`).

    The marker is the same for every icore writer but its id, so its header's link (its
    chain's first) is known from the id alone: an appended writer's chain that opens at
    ``seq`` 2 with it as ``prev`` is whole, and shows the writer's promises (#29).
    ``digests``: the marker's (:data:`icore._writer_mark.EARLIER_DIGESTS` for a writer
    before whole-line digests).
    """
    return link(writer, 1, "", mark_digest(writer_mark(writer, digests)))


def _where(n: int | str) -> str:
    return n if isinstance(n, str) else f"line {n}"


class ChainCheck:
    """Checks every writer's chain as the lines are read, one line at a time (#29).

    Holds one ``(seq, link, where)`` per writer, the first break of each, and the end
    lines' seals (checked by :meth:`result`): memory grows with the writers, not the
    lines. :func:`chain_problems` says what is checked.
    """

    def __init__(self) -> None:
        self.digested = 0
        """How many lines carried a digest or a chain."""
        self.chained = False
        """Whether some line carried a ``chain``."""
        self._state: dict[str, tuple[int, str, int | str]] = {}  # writer -> (seq, link, where)
        self._broken: dict[str, str] = {}  # writer -> why (its first break)
        self._loose: list[str] = []
        self._unchained: int | str | None = None  # the first digested line with no chain
        self._seals: list[tuple[int | str, Any]] = []
        self.marked: set[str] = set()
        """The writers whose chain opens with their writer marker's header
        (:mod:`icore._writer_mark`): seen, or dropped as an appended writer's header is."""
        self.lined: set[str] = set()
        """Those of :attr:`marked` whose marker promises whole-line digests."""

    def line(self, n: int | str, c: Any, got: Any) -> None:
        """One line (``n``: its number or place) with its chain value and digest as read."""
        self.digested += 1
        if c is None:
            if self._unchained is None:
                self._unchained = n
            return
        self.chained = True
        if not isinstance(c, Mapping):
            self._loose.append(f"{_where(n)}: its chain is not an object")
            return
        w, seq, prev = c.get("writer"), c.get("seq"), c.get("prev")
        if not isinstance(w, str) or type(seq) is not int or seq < 1 \
                or not isinstance(prev, str):
            self._loose.append(f"{_where(n)}: its chain is malformed (writer: a string, seq: "
                               "an integer >= 1, prev: a string)")
            return
        had, last, at = self._state.get(w, (0, "", 0))
        for digests in (DIGESTS, EARLIER_DIGESTS):
            if not had and (seq, prev) == (2, header_link(w, digests)):
                # a marked writer appending to another's file leaves its header out (#29)
                self.marked.add(w)
                had, last = 1, prev
            elif seq == 1 and got == mark_digest(writer_mark(w, digests)):
                self.marked.add(w)
            else:
                continue
            if digests is DIGESTS:
                self.lined.add(w)
            break
        if w not in self._broken and (seq != had + 1 or prev != last):
            before = f" (its writer's previous one is {_where(at)})" if at else ""
            if seq <= had:
                what = (f"its sequence number {seq} repeats or goes back (after {had}): a "
                        "line duplicated or moved")
            elif seq > had + 1:
                what = (f"its sequence number {seq} follows {had}: {seq - had - 1} line(s) "
                        "of that writer missing before it (deleted or moved)")
            else:
                what = ("it does not link to its writer's previous line: a line before "
                        "it was edited, replaced or moved")
            self._broken[w] = (f"the chain of writer {w[:16]} breaks at {_where(n)}{before}: "
                               f"{what}")
        self._state[w] = (seq, link(w, seq, prev, got if isinstance(got, str) else repr(got)),
                          n)

    def seal(self, n: int | str, value: Any) -> None:
        """An end line's ``chain_end`` as read (checked at :meth:`result`)."""
        self._seals.append((n, value))

    def result(self, *, file: str, note: bool = True) -> tuple[str | None, tuple[str, ...]]:
        """``(why, warnings)`` as :func:`chain_problems` gives them."""
        if not self.chained and not self._seals:
            return None, ((f"{file}: note: its {self.digested} digested line(s) carry no "
                           "chain (written before the chain, or by another writer): a "
                           "deleted, moved or repeated line cannot be detected; audited as "
                           "recorded",) if note and self.digested else ())
        loose = list(self._loose)
        if self._unchained is not None:
            loose.insert(0, f"{_where(self._unchained)} carries a digest but no chain while "
                         "the trace's other digested lines do (a line added, or its chain "
                         "removed)")
        broken = dict(self._broken)
        for n, s in self._seals:
            if not isinstance(s, Mapping) or not isinstance(s.get("writer"), str):
                loose.append(f"{_where(n)}: its chain_end is malformed")
                continue
            w = s["writer"]
            if w in broken:
                continue
            had, last, _ = self._state.get(w, (0, "", 0))
            if s.get("lines") != had or s.get("last") != last:
                broken[w] = (f"the chain of writer {w[:16]} breaks at the run's end "
                             f"({_where(n)}): it says its writer wrote {s.get('lines')!r} "
                             f"digested line(s), the file holds {had} that reach it (lines "
                             "cut off, removed or added)")
        whys = [*loose, *broken.values()]
        if not whys:
            return None, ()
        return whys[0], tuple(f"{file}: {why}; every protected action of the run is "
                              "INVALID (which action a missing or moved line concerned "
                              "cannot be known)" for why in whys)


def chain_problems(links: Sequence[tuple[int | str, Any, Any]],
                   seals: Sequence[tuple[int | str, Any]], *, file: str, digested: int
                   ) -> tuple[str | None, tuple[str, ...]]:
    """Where a writer's chain breaks, and the warnings (or the note on an unchained trace).

    Args:
        links: ``(line number, chain value as read or None, the line's digest as read)``
            per line that carries a ``chain`` or a digest, in file order (a place named
            otherwise, e.g. ``span <id>``: a str instead of the line number).
        seals: ``(line number, chain_end value as read)`` per end line carrying one.
        file: the trace file, for the messages.
        digested: 0 to give no note on a trace written before the chain (else one).

    Returns:
        ``(why, warnings)``: ``why`` names the first line where a chain breaks (None:
        every chain is whole): a line of a writer whose sequence number skips (lines
        missing before it), repeats or goes back (a line duplicated or moved), whose
        ``prev`` is not the link of its writer's previous line (a line before it edited,
        replaced or moved), a malformed ``chain``, a digested line with no ``chain`` in
        a trace whose other lines have one, or an end line's ``chain_end`` its writer's
        lines do not reach or pass (lines cut off or added). A trace none of whose lines
        carries a ``chain`` (written before #29's chain) gives None and one note.
    """
    check = ChainCheck()
    for n, c, got in links:
        check.line(n, c, got)
    for n, v in seals:
        check.seal(n, v)
    return check.result(file=file, note=bool(digested))


__all__ = ["CHAIN", "CHAIN_END", "ChainCheck", "ChainWriter", "chain_lines",
           "chain_problems", "header_link", "is_end", "line_digest_of", "link"]
