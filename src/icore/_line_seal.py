"""Every line an icore writer writes carries a digest of the whole line (QA qa-new14 S3).

Before, only the lines an audit's verdict read were digested (decisions, records, human
answers, tool outcomes: :mod:`icore._line_digest`), so a model turn (an ``output`` line
and the ``tool_calls`` it asked for), a plan, a handoff or the header's ``succeeded`` could
be edited, and an undigested line deleted, without the audit seeing it. An icore writer
now digests every line it writes, over all of its fields (:func:`whole_digest`), and so
chains every line (:mod:`icore._line_chain`):

- an event line's ``digest`` is :func:`whole_digest` of the line (a human-answer /
  tool-outcome line's too: :func:`icore._line_digest.checked_line` accepts it);
- a PlanFence line carries its own top-level ``digest`` (besides its decision's digest or
  its record's id), and its chain link binds that one;
- the header keeps the writer marker's digest as its chain digest (so an appended
  writer's chain opens from its id alone: :func:`icore._line_chain.header_link`) and
  carries ``run_digest``, :func:`whole_digest` of the header line.

The writer marker says so (``"lines"`` in its ``digests``, :mod:`icore._writer_mark`);
:class:`SealCheck` holds a trace whose marker promises it to every line: a line with no
digest, or one its fields no longer hash to, makes every protected action ``INVALID``.
A trace whose marker does not promise it (older icore versions, hand-written JSONL, OTel
imports) is read as before. A plain hash, not a signature (as the chain). Pure: no I/O.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

from icore._strict_json import finite_data

LINES = "lines"
"""The ``digests`` entry of a writer marker promising a whole-line digest on every line."""
RUN_DIGEST = "run_digest"
"""The header's key for its whole-line digest."""

_DOMAIN = b"icore.line.v1\n"
_SKIP = frozenset(("digest", "chain", "chain_end", RUN_DIGEST))
_KEEP = 20  # the lines named in full (a trace of an older writer may lack many)


def whole_digest(line: Mapping[str, Any]) -> str:
    """sha256 hex (64 digits) of every field of ``line`` but its digests and chain.

    ``digest``, ``run_digest``, ``chain`` and ``chain_end`` are left out (the chain binds
    the digest; an end line's seal is checked by the chain); a PlanFence decision counts
    by its own digest (:meth:`icore.fence.DecisionEntry.digest`, checked for its action
    alone). Canonical JSON (sorted keys,
    non-finite floats as their text), so the line as written and as read hash the same.
    Never raises: a value with no JSON form is hashed as its ``repr``.
    """
    body = {k: v for k, v in line.items() if k not in _SKIP}
    pf = body.get("planfence")
    if isinstance(pf, Mapping) and isinstance(pf.get("decision"), Mapping):
        # a decision has its own digest, checked for its action alone (#29)
        body["planfence"] = {**pf, "decision": pf["decision"].get("digest")}
    try:
        text = json.dumps(finite_data(body), sort_keys=True, separators=(",", ":"),
                          ensure_ascii=True, allow_nan=False, default=repr)
    except (TypeError, ValueError, RecursionError):
        text = repr(sorted(body.items(), key=lambda kv: str(kv[0])))
    return hashlib.sha256(_DOMAIN + text.encode("ascii", "backslashreplace")).hexdigest()


def is_header(line: Mapping[str, Any]) -> bool:
    """Whether ``line`` is a run header (``{"run": {...}}``, no ``agent``)."""
    return "run" in line and "agent" not in line


def sealed(line: Mapping[str, Any]) -> dict[str, Any]:
    """``line`` (a fresh dict) with its whole-line digest, as an icore writer writes it.

    A header gets ``run_digest`` (its ``digest`` stays the writer marker's); any other
    line gets ``digest``. Call it on the line as it is written, before its chain link.
    """
    out = dict(line)
    out[RUN_DIGEST if is_header(line) else "digest"] = whole_digest(line)
    return out


def line_place(n: int | str) -> str:
    """``line 4`` for a line number, the place itself otherwise."""
    return n if isinstance(n, str) else f"line {n}"


class SealCheck:
    """Checks every line's whole-line digest as the lines are read.

    :meth:`line` takes each line; :meth:`result` gives why the run's actions are
    ``INVALID`` when the writer marker promises whole-line digests (``promised``), else
    nothing. Memory: the first :data:`_KEEP` lines lacking or failing a digest and counts.
    """

    def __init__(self, file: str) -> None:
        self.file = file
        self._missing: list[str] = []
        self._edited: list[str] = []
        self._counts = [0, 0]  # missing, edited

    def line(self, n: int | str, line: Mapping[str, Any], *, own: bool = False) -> None:
        """One line (``n``: its number) as read: header, event or PlanFence line.

        ``own``: the line's digest is checked for its action alone (a human-answer /
        tool-outcome line, :func:`icore._line_digest.checked_line`): skipped here.
        """
        if own:
            return
        key = RUN_DIGEST if is_header(line) else "digest"
        got = line.get(key)
        what = ("the run header" if key == RUN_DIGEST else "a PlanFence line"
                if "planfence" in line and "agent" not in line else
                f"an {line.get('kind')!s} line of {line.get('agent')!s}"[:80])
        if got is None:
            self._counts[0] += 1
            if len(self._missing) < _KEEP:
                self._missing.append(f"{line_place(n)} ({what}) carries no {key} although "
                                     "the writer marker promises one on every line (it "
                                     "was stripped, or the line added)")
        elif got != whole_digest(line):
            self._counts[1] += 1
            if len(self._edited) < _KEEP:
                self._edited.append(f"{line_place(n)} ({what}) does not match its {key}: "
                                    "its fields hash to another digest (the line was "
                                    "edited after it was written)")

    def result(self, promised: bool) -> tuple[str | None, tuple[str, ...]]:
        """``(why, warnings)``: ``why`` None when every line matches or nothing is promised."""
        if not promised:
            return None, ()
        whys = [*self._edited, *self._missing]
        more = sum(self._counts) - len(whys)
        if not whys:
            return None, ()
        tail = f" (and {more} more such line(s))" if more > 0 else ""
        return whys[0] + tail, tuple(
            f"{self.file}: {why}; every protected action of the run is INVALID (which "
            "action an edited line concerned cannot be known)" for why in whys) + (
            (f"{self.file}: {more} more line(s) lack or fail their digest",) if more > 0
            else ())


__all__ = ["LINES", "RUN_DIGEST", "SealCheck", "is_header", "line_place", "sealed",
           "whole_digest"]
