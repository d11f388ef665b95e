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

from icore._line_seal import whole_digest
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
    from both :func:`line_digest` and the whole-line digest an icore writer now writes
    on every line (:func:`icore._line_seal.whole_digest`, which covers these fields).
    """
    if not guarded(line if line.get("kind") == kind else {**line, "kind": kind}):
        return None
    got = line.get("digest")
    return got, isinstance(got, str) and got in (line_digest(line), whole_digest(line))


def line_action(line: Mapping[str, Any]) -> str:
    """The action a guarded line concerns: ``task``, ``tool``, ``approval.tool``, or "action"."""
    ap = line.get("approval")
    for v in (line.get("task"), line.get("tool"),
              ap.get("tool") if isinstance(ap, Mapping) else None):
        if isinstance(v, str) and v:
            return v
    return "action"


def line_digest_problems(
        lines: Sequence[tuple[int, str, Any, bool, tuple[str | None, int] | None]], *,
        file: str, protected: bool
) -> tuple[dict[str, str], tuple[tuple[str, str | None, int, str], ...], tuple[str, ...]]:
    """The guarded event lines that do not match their digest, and the warnings (#29).

    Args:
        lines: ``(line number, action, recorded digest, matches, answer)`` per guarded
            line (:func:`checked_line`, :func:`line_action`), in file order; ``answer``
            is ``(canonical arguments or None, step index)`` for a human answer naming
            no ``task`` (:attr:`icore.adapters.HumanAnswer.args`, ``.step``), else None.
        file: the trace file, for the warnings.
        protected: whether the trace has PlanFence lines (the note on a trace whose
            guarded lines carry no digest is given only then).

    Returns:
        ``(action -> why, answers, warnings)``: each action (a ``task``, else a tool) one
        of whose lines was edited (a present digest that does not match, or a missing
        one while another guarded line has one) is counted ``INVALID`` by the audit; an
        edited human answer naming no ``task`` is one of ``answers``, ``(tool,
        arguments or None, step, why)``: only the actions it could have answered are
        ``INVALID`` (its tool's with those arguments, and the one it is linked to; every
        action of its tool when it records none or none has them). One warning per
        such line. A trace none of
        whose guarded lines carries a digest (written before this check, or by another
        writer) is read as recorded, with one note.
    """
    if not any(got is not None for _, _, got, _, _ in lines):
        return {}, (), ((f"{file}: note: its {len(lines)} human-answer / tool-outcome "
                         "line(s) carry no digest (written before #29 or by another "
                         "writer): an edit to them cannot be detected; audited as recorded",)
                        if lines and protected else ())
    out: dict[str, str] = {}
    answers: list[tuple[str, str | None, int, str]] = []
    warnings: list[str] = []
    for n, action, got, ok, answer in lines:
        if ok:
            continue
        why = ("it carries no digest while the trace's other such lines do" if got is None
               else "its fields hash to another digest" if isinstance(got, str)
               else "its digest is not a string")
        said = (f"the human-answer / tool-outcome line {n} of {action!r} does not match "
                f"its digest: {why} (the trace was edited or damaged)")
        if answer is None:
            out.setdefault(action, said)
            warnings.append(f"{file}: {said}; the protected action it concerns is INVALID")
        else:
            answers.append((action, answer[0], answer[1], said))
            warnings.append(f"{file}: {said}; the protected actions it could have answered "
                            "(its tool's, with its arguments) are INVALID")
    return out, tuple(answers), tuple(warnings)


_SPAN_DOMAIN = b"icore.span-attributes.v1\n"


def _attr_value(v: Any) -> Any:
    """An attribute value as the digest reads it.

    Every number a float (an exporter may write ``3`` as ``3.0`` and back), sequences
    as lists.
    """
    if isinstance(v, bool) or v is None or isinstance(v, str):
        return v
    if isinstance(v, int | float):
        f = float(v)
        return f if f == f and f not in (float("inf"), float("-inf")) else repr(v)
    if isinstance(v, list | tuple):
        return [_attr_value(x) for x in v]
    return repr(v)


def attributes_digest(attrs: Mapping[str, Any], prefix: str) -> str:
    """sha256 hex of a span's attributes under ``prefix`` (``icore.gate.``), but its digest.

    What the OpenTelemetry exporter writes as ``<prefix>digest`` on a gate decision's and
    a human answer's span, and the importer recomputes (#29). Canonical JSON of the
    attributes named ``prefix...`` (``<prefix>digest`` left out), numbers as floats.
    Never raises.
    """
    skip = prefix + "digest"
    body = {k: _attr_value(v) for k, v in attrs.items() if k.startswith(prefix) and k != skip}
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=True,
                      default=repr)
    return hashlib.sha256(_SPAN_DOMAIN + text.encode("ascii", "backslashreplace")).hexdigest()


__all__ = ["FIELDS", "attributes_digest", "checked_line", "guarded", "line_action",
           "line_digest", "line_digest_problems", "with_digest"]
