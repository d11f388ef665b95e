"""Digests of the event lines an audit's verdict reads besides decisions (#29).

A PlanFence decision line carries its digest (:meth:`icore.fence.DecisionEntry.digest`).
Two other kinds of event line decide what the audit reports: a human's answer to a
protected call (a ``thought`` or ``tool_output`` with ``answered_by`` or ``approval``:
editing ``reject`` into ``approve`` changes what a human did), and a ``tool_output``
that says whether a protected call ran (``ran``, ``exitcode``, ``blocked``, ``task``:
read by the ran-after-refusal, ran-surplus and unknown-outcome rules). The recorders
write :func:`line_digest` as such a line's ``digest``; the JSONL importer recomputes it
(:func:`checked_line`). Pure: no I/O.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

from icore._strict_json import finite_data

FIELDS = ("agent", "kind", "content", "task", "tool", "args", "approval", "answered_by",
          "decision", "ran", "exitcode", "blocked", "failed", "may_have_run", "reason",
          "step", "error")
"""The fields of an event line its digest covers (those the audit reads of it)."""

_DOMAIN = b"icore.event-line.v1\n"
_OUTCOME = ("ran", "exitcode", "blocked", "task")


def guarded(line: Mapping[str, Any]) -> bool:
    """Whether an event line is one whose digest is written and checked.

    A ``thought`` or ``tool_output`` carrying ``answered_by`` or ``approval`` (a human's
    answer), or a ``tool_output`` carrying ``ran``, ``exitcode``, ``blocked`` or ``task``
    (whether a call ran).
    """
    kind = line.get("kind")
    if kind == "tool_output":
        return any(k in line for k in _OUTCOME) or "answered_by" in line \
            or "approval" in line
    return kind == "thought" and ("answered_by" in line or "approval" in line)


def line_digest(line: Mapping[str, Any]) -> str:
    """sha256 hex (64 digits) of the :data:`FIELDS` a line carries, as canonical JSON.

    Equal fields give equal digests (key order, other fields and a non-finite float
    written as its text do not matter). Never raises: a value with no JSON form is
    hashed as its ``repr``.
    """
    body = {k: line[k] for k in FIELDS if k in line}
    try:
        text = json.dumps(finite_data(body), sort_keys=True, separators=(",", ":"),
                          ensure_ascii=True, allow_nan=False, default=repr)
    except (TypeError, ValueError, RecursionError):
        text = repr(sorted(body.items(), key=lambda kv: kv[0]))
    return hashlib.sha256(_DOMAIN + text.encode("ascii", "backslashreplace")).hexdigest()


def with_digest(line: Mapping[str, Any]) -> Mapping[str, Any]:
    """``line`` with its ``digest`` when :func:`guarded` (a fresh dict), else itself."""
    if not guarded(line):
        return line
    out = dict(line)
    out.pop("digest", None)
    out["digest"] = line_digest(out)
    return out


def checked_line(line: Mapping[str, Any], kind: str) -> tuple[Any, bool] | None:
    """``(recorded digest, matches)`` of a :func:`guarded` event line, else None.

    ``kind`` is the line's step kind as read (``thought``, ``tool_output``, ...).
    ``matches`` is False when the recorded digest is absent, not a string, or differs
    from :func:`line_digest`.
    """
    if not guarded(line if line.get("kind") == kind else {**line, "kind": kind}):
        return None
    got = line.get("digest")
    return got, isinstance(got, str) and got == line_digest(line)


def line_action(line: Mapping[str, Any]) -> str:
    """The action a guarded line concerns: ``task``, ``tool``, ``approval.tool``, or "action"."""
    ap = line.get("approval")
    for v in (line.get("task"), line.get("tool"),
              ap.get("tool") if isinstance(ap, Mapping) else None):
        if isinstance(v, str) and v:
            return v
    return "action"


def line_digest_problems(lines: Sequence[tuple[int, str, Any, bool]], *, file: str,
                         protected: bool) -> tuple[dict[str, str], tuple[str, ...]]:
    """The guarded event lines that do not match their digest, and the warnings (#29).

    Args:
        lines: ``(line number, action, recorded digest, matches)`` per guarded line
            (:func:`checked_line`, :func:`line_action`), in file order.
        file: the trace file, for the warnings.
        protected: whether the trace has PlanFence lines (the note on a trace whose
            guarded lines carry no digest is given only then).

    Returns:
        ``(action -> why, warnings)``: each action one of whose lines was edited (a
        present digest that does not match, or a missing one while another guarded
        line has one) is counted ``INVALID`` by the audit; one warning per such line.
        A trace none of whose guarded lines carries a digest (written before this
        check, or by another writer) is read as recorded, with one note.
    """
    if not any(got is not None for _, _, got, _ in lines):
        return {}, ((f"{file}: note: its {len(lines)} human-answer / tool-outcome "
                     "line(s) carry no digest (written before #29 or by another writer): "
                     "an edit to them cannot be detected; audited as recorded",)
                    if lines and protected else ())
    out: dict[str, str] = {}
    warnings: list[str] = []
    for n, action, got, ok in lines:
        if ok:
            continue
        why = ("it carries no digest while the trace's other such lines do" if got is None
               else "its fields hash to another digest" if isinstance(got, str)
               else "its digest is not a string")
        said = (f"the human-answer / tool-outcome line {n} of {action!r} does not match "
                f"its digest: {why} (the trace was edited or damaged)")
        out.setdefault(action, said)
        warnings.append(f"{file}: {said}; the protected action it concerns is INVALID")
    return out, tuple(warnings)


__all__ = ["FIELDS", "checked_line", "guarded", "line_action", "line_digest",
           "line_digest_problems", "with_digest"]
