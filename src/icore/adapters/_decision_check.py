"""Gate decisions and PlanFence records read from a trace, checked at the import (issue 29).

A recorded decision decides an action's lineage verdict (``valid``, ``INVALID``,
``blocked``, ...; :mod:`icore.adapters._action_lineage`), so the importers accept only
what icore writes: :func:`checked_decision` for a JSONL ``{"planfence": {"decision":
...}}`` line and, through :func:`gate_span_decision`, for an OpenTelemetry gate span's
``icore.gate.*`` attributes; :func:`check_record_line` for a JSONL record line. Anything
else (an unknown outcome, a reason that is not a string, an infinite time, a record
line's id that is not 64 hex digits, parallel key/id arrays of different lengths, a key named
twice) is an :class:`AdapterError` naming the file and the field, never a silently
different verdict. Unknown reason codes are kept (they name, they do not decide).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from typing import Any

from icore.adapters import _otel_names as N
from icore.adapters._errors import AdapterError
from icore.errors import IcoreError
from icore.fence import DecisionEntry, DecisionFormatError, Outcome
from icore.records import Record, is_record_id

OUTCOMES = tuple(o.value for o in Outcome)
"""The gate outcomes a recorded decision may have."""

_TEXT = ("action", "policy", "detail", "task")
_COUNTS = ("point", "owners_contacted", "heads_checked")


def _bad(problem: str, file: str, field: str) -> AdapterError:
    return AdapterError(problem, file=file, field=field)


def _ids(v: Any, file: str, field: str, *, strict: bool = True) -> None:
    """A list of record ids: 64 lowercase hex digits (``strict``), else non-empty strings.

    A gate decision keeps the roots it was called with, even ones that are no record's
    (it blocks them), so its ids are only checked to be strings; a record line's are
    the record store's own.
    """
    if not isinstance(v, list | tuple):
        raise _bad(f"must be a list of record ids, not {type(v).__name__}", file, field)
    for i, x in enumerate(v):
        if not (is_record_id(x) if strict else isinstance(x, str) and x):
            raise _bad(f"not a record id{' (64 lowercase hex digits)' if strict else ''}: "
                       f"{_short(x)}", file, f"{field}[{i}]")


def _map(v: Any, file: str, field: str) -> None:
    """Key -> record id (a non-empty string)."""
    if not isinstance(v, Mapping):
        raise _bad("must be an object of key -> record id", file, field)
    for k, x in v.items():
        if not isinstance(k, str) or not k:
            raise _bad(f"not a key: {_short(k)}", file, field)
        if not isinstance(x, str) or not x:
            raise _bad(f"not a record id: {_short(x)}", file, f"{field}.{k}")


def checked_decision(obj: Any, *, file: str, field: str) -> DecisionEntry:
    """A recorded gate decision, validated (see the module docstring).

    Args:
        obj: the decision's JSON object (:meth:`icore.fence.DecisionEntry.to_dict`).
        file: the trace file, for errors.
        field: where ``obj`` sits (``line 4.planfence.decision``).

    Returns:
        The typed decision.

    Raises:
        AdapterError: ``outcome`` is not one of :data:`OUTCOMES`; ``reason`` is not a
            non-empty string; ``action``/``policy``/``detail``/``task`` is not a string;
            ``point``/``owners_contacted``/``heads_checked`` is not an integer >= 0;
            ``at_ms`` is not a finite number >= 0; ``roots`` is not a list of record
            ids (strings), ``deps`` not a list of keys; ``frontier``/``heads``/``fresh`` is
            not an object of key -> record id (a string); or anything
            :meth:`~icore.fence.DecisionEntry.from_dict` refuses.
    """
    try:
        entry = DecisionEntry.from_dict(obj, where=field)
    except DecisionFormatError as exc:
        raise _bad(exc.message, file, str(exc.fields.get("field", field))) from None
    if entry.outcome not in OUTCOMES or not isinstance(obj.get("outcome"), str):
        raise _bad(f"unknown outcome {_short(obj.get('outcome'))} (one of "
                   f"{', '.join(OUTCOMES)})", file, f"{field}.outcome")
    if not isinstance(obj.get("reason"), str) or not obj["reason"].strip():
        raise _bad(f"must be a non-empty string (a reason code), not "
                   f"{_short(obj.get('reason'))}", file, f"{field}.reason")
    for k in _TEXT:
        if obj.get(k) is not None and not isinstance(obj[k], str):
            raise _bad(f"must be a string, not {_short(obj[k])}", file, f"{field}.{k}")
    for k in _COUNTS:
        v = obj.get(k)
        if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 0):
            raise _bad(f"must be an integer >= 0, not {_short(v)}", file, f"{field}.{k}")
    at = obj.get("at_ms")
    if at is not None and (isinstance(at, bool) or not isinstance(at, int | float)
                           or not math.isfinite(at) or at < 0):
        raise _bad(f"must be a finite number of ms >= 0, not {_short(at)}", file,
                   f"{field}.at_ms")
    if obj.get("roots") is not None:
        _ids(obj["roots"], file, f"{field}.roots", strict=False)
    deps = obj.get("deps")
    if deps is not None and (not isinstance(deps, list | tuple) or not all(
            isinstance(d, str) and d for d in deps)):
        raise _bad("must be a list of keys (non-empty strings)", file, f"{field}.deps")
    for m in ("frontier", "heads", "fresh"):
        if obj.get(m) is not None:
            _map(obj[m], file, f"{field}.{m}")
    return entry


def gate_span_decision(a: Mapping[str, Any], task: str, *, file: str,
                       where: str) -> DecisionEntry | None:
    """The decision an icore guardrail span carries (``icore.gate.*``), or None.

    The inverse of the exporter's ``decision_attributes``: parallel ``<map>.keys`` /
    ``<map>.ids`` arrays back to maps. A span with no ``icore.gate.*`` attribute is
    another tool's guardrail (None); one with some but no string ``icore.gate.outcome``
    or ``icore.gate.reason`` is refused (dropping it would hide a stale action).

    Args:
        a: the span's attributes.
        task: the protected call the decision belongs to (groups an action's decisions).
        file: the trace file, for errors.
        where: the span, for errors (``span <id> ('<name>')``).

    Raises:
        AdapterError: as :func:`checked_decision` (fields named ``<where>.icore.gate.*``),
            ``icore.gate.*`` attributes without a string outcome or reason, or
            parallel arrays that are not lists of strings, differ in length, or name a
            key twice.
    """
    g = N.G
    for k in ("outcome", "reason"):
        if not isinstance(a.get(g + k), str):
            if any(x.startswith(g) for x in a):  # icore's, not another tool's: not dropped
                raise _bad(f"an icore gate decision needs a string {g}{k}", file,
                           f"{where}.{g}{k}")
            return None
    d: dict[str, Any] = {k: a[g + k] for k in ("outcome", "reason", "action", "policy",
                                               "detail", "replanned", "at_ms", *_COUNTS)
                         if a.get(g + k) is not None}
    for k in ("roots", "deps"):
        v = a.get(g + k)
        if v is not None:
            d[k] = list(v) if isinstance(v, list | tuple) else v
    for m in ("frontier", "heads", "fresh"):
        keys, ids = a.get(f"{g}{m}.keys"), a.get(f"{g}{m}.ids")
        if keys is None and ids is None:
            continue
        f = f"{where}.{g}{m}"
        if not isinstance(keys, list | tuple) or not isinstance(ids, list | tuple):
            raise _bad(".keys and .ids must both be arrays", file, f)
        if len(keys) != len(ids):
            raise _bad(f".keys has {len(keys)} entries but .ids {len(ids)}", file, f)
        if len(set(map(str, keys))) != len(keys):
            raise _bad("a key is named twice in .keys", file, f"{f}.keys")
        if not all(isinstance(k, str) for k in keys):
            raise _bad(".keys must be strings", file, f"{f}.keys")
        d[m] = dict(zip(keys, ids, strict=True))
    if task:
        d["task"] = task
    return checked_decision(d, file=file, field=f"{where}.{g.rstrip('.')}")


def check_record_line(rec: Any, *, file: str, field: str) -> None:
    """A JSONL PlanFence record line: id, key, owner, seq and parents checked.

    Raises:
        AdapterError: not an object; ``id`` is not a record id (64 lowercase hex);
            ``key`` is not a non-empty string; ``owner``/``type``/``role`` is not a
            string; ``seq`` is not an integer >= 0; ``parents`` is not a list of record
            ids; ``supersedes`` is given but is not a record id.
    """
    if not isinstance(rec, Mapping):
        raise _bad("a record must be an object", file, field)
    if not is_record_id(rec.get("id")):
        raise _bad(f"not a record id (64 lowercase hex digits): {_short(rec.get('id'))}",
                   file, f"{field}.id")
    if not isinstance(rec.get("key"), str) or not rec["key"]:
        raise _bad(f"must be a non-empty string, not {_short(rec.get('key'))}", file,
                   f"{field}.key")
    for k in ("owner", "type", "role"):
        if rec.get(k) is not None and not isinstance(rec[k], str):
            raise _bad(f"must be a string, not {_short(rec[k])}", file, f"{field}.{k}")
    seq = rec.get("seq")
    if seq is not None and (isinstance(seq, bool) or not isinstance(seq, int) or seq < 0):
        raise _bad(f"must be an integer >= 0, not {_short(seq)}", file, f"{field}.seq")
    _ids(rec.get("parents", []), file, f"{field}.parents")
    sup = rec.get("supersedes")
    if sup is not None and not is_record_id(sup):
        raise _bad(f"not a record id (64 lowercase hex digits): {_short(sup)}", file,
                   f"{field}.supersedes")


def check_record_links(records: list[tuple[str, Mapping[str, Any]]], *, file: str) -> None:
    """Record ids unique and ``parents`` links acyclic over one trace's record lines.

    A record id is the digest of its content, so one id carried by two different
    records, or a record that is its own ancestor, cannot come from a record store:
    the trace was edited or damaged, and its lineage verdicts would be read off
    whichever record won. A line repeated identically is kept once. Parents that are
    not in the trace are left alone (a trace may hold only part of the store).

    Args:
        records: ``(field, record)`` pairs in file order, each already passed by
            :func:`check_record_line` (``field`` as ``line 3.planfence.record``).
        file: the trace file, for errors.

    Raises:
        AdapterError: two different records with one id (naming both lines), or a cycle
            of ``parents`` links (naming the records' lines along the cycle).
    """
    seen: dict[str, tuple[str, Mapping[str, Any]]] = {}
    for field, rec in records:
        first = seen.setdefault(rec["id"], (field, rec))
        try:
            differs = first[1] is not rec and first[1] != rec
        except RecursionError:  # nested past the compare's limit: not shown to be equal
            differs = True
        if differs:
            raise _bad(f"record id {rec['id'][:12]}... is also the id of a different record "
                       f"at {first[0]}: an id is its record's digest, so the trace was "
                       "edited or damaged", file, f"{field}.id")
    parents = {i: [p for p in r.get("parents", ()) if p in seen] for i, (_, r) in seen.items()}
    state: dict[str, int] = {}  # 1 = on the current path, 2 = done
    for start in parents:
        if start in state:
            continue
        path = [start]
        todo = [iter(parents[start])]
        state[start] = 1
        while todo:
            nxt = next(todo[-1], None)
            if nxt is None:
                state[path.pop()] = 2
                todo.pop()
            elif state.get(nxt) == 1:
                cyc = [*path[path.index(nxt):], nxt]
                where = " -> ".join(seen[i][0] for i in cyc)
                raise _bad(f"the records' parents links form a cycle ({where}): a record "
                           "cannot be its own ancestor, so the trace was edited or damaged",
                           file, f"{seen[nxt][0]}.parents")
            elif nxt not in state:
                state[nxt] = 1
                path.append(nxt)
                todo.append(iter(parents[nxt]))


def record_id_problems(records: list[tuple[str, Mapping[str, Any]]]
                       ) -> dict[str, str]:
    """The record lines whose id is not the digest of the fields they carry (QA qa-new9 S3).

    A record id is the sha256 of the record's envelope (:meth:`icore.records.Record.
    compute_id`: key, owner, seq, parents, type, the content's address and size, and the
    ``supersedes`` link when set), so a line carrying its ``content``, ``owner``, ``seq``
    and ``type`` is recomputed and compared: an edited argument, key or parent gives
    another id. A line without its content (cut for size) cannot be checked and is left
    alone. A line without ``supersedes`` (recorders before #29 left it out of a
    revision) is also tried with each other version of its key in the trace as the one
    it replaced.

    Args:
        records: ``(field, record)`` pairs in file order (``field`` as ``line 3.planfence.
            record``), each already passed by :func:`check_record_line`.

    Returns:
        Record id -> why, for each line whose id does not match (naming its line); empty
        when every checkable line matches.
    """
    by_key: dict[str, list[str]] = {}
    for _, rec in records:
        by_key.setdefault(str(rec["key"]), []).append(str(rec["id"]))
    out: dict[str, str] = {}
    for field, rec in records:
        if "content" not in rec or not all(isinstance(rec.get(k), t) for k, t in (
                ("owner", str), ("seq", int), ("type", str))):
            continue
        sup = rec.get("supersedes")
        # a generator: the other versions are tried only when the id does not match
        tries = iter((sup,)) if sup is not None else itertools.chain((None,), (
            i for i in by_key[str(rec["key"])] if i != rec["id"]))
        why, matched = "its fields hash to another id", False
        for u in tries:
            try:
                matched = Record.create(
                    key=rec["key"], owner=rec["owner"], seq=rec["seq"],
                    content=rec["content"], parents=rec.get("parents") or (),
                    type=rec["type"], supersedes=u).id == rec["id"]
            except (IcoreError, TypeError, ValueError, RecursionError) as exc:
                why = f"its fields form no record ({str(exc)[:120]})"
                break
            if matched:
                break
        if not matched:
            line = field.split(".", 1)[0]
            out.setdefault(str(rec["id"]), f"record {str(rec['id'])[:12]}... ({rec['key']!r}, "
                           f"{line}) does not match its id: {why} (an id is its record's "
                           "digest: the trace was edited or damaged)")
    return out


NO_DIGESTS = ("no digest (written before #29 or by another writer): a decision edited "
              "after recording cannot be detected; audited as recorded")
"""The note on a trace whose decision lines carry no ``digest`` at all."""


def decision_digest_problems(lines: Sequence[tuple[str, Any]],
                             decisions: Sequence[DecisionEntry], *, file: str,
                             events: Sequence[tuple[Any, ...]] = ()
                             ) -> tuple[dict[int, str], tuple[str, ...]]:
    """The decision lines that do not match their digest, and the import's warnings (#29).

    A recorder writes each decision line's :meth:`icore.fence.DecisionEntry.digest`
    (``digest``): the sha256 of everything the decision records (outcome, reason, roots,
    D(a), frontier, heads, task, error, ...). A line whose recomputed digest differs (an
    outcome ``stale`` made ``authorized``, a head changed), whose ``digest`` is not a
    string, or that has none while another decision line of the trace has one (an
    edit that dropped it) was edited after recording: its action's verdict cannot be
    trusted (the audit counts it ``INVALID``). A trace none of whose decision lines
    carries a digest (written before #29, or by another writer) is audited as recorded,
    with one note saying its decisions are unchecked, unless its human-answer or
    tool-outcome lines carry digests (``events``): only icore's recorders write
    those, and they digest every decision, so there a decision line without one was
    stripped (round 8 of the bad-input sweep: a stale refusal rewritten ``authorized``
    with its heads made its frontier, every decision digest dropped, read valid). The
    other way round is not inferred: another writer may digest its decisions through
    the public :meth:`icore.fence.DecisionEntry.to_dict` and not its event lines.

    Args:
        lines: ``(field, recorded digest)`` per decision line, in file order (``field``
            as ``line 4.planfence.decision``; the digest as recorded, None when absent).
        decisions: the typed decisions of those lines, in the same order.
        file: the trace file, for the warnings.
        events: the trace's human-answer / tool-outcome lines, ``(line number, action,
            recorded digest, matches)`` each (:func:`icore._line_digest.checked_line`).

    Returns:
        ``(index -> why, warnings)``: the index in ``decisions`` of each line that does
        not match, why (naming its line); one warning per such line, or the note.
    """
    own = any(d is not None for _, d in lines)
    if not own and not any(e[2] is not None for e in events):
        n = len(lines)
        lines_carry = "decision lines carry" if n > 1 else "decision line carries"
        return {}, ((f"{file}: note: its {n} PlanFence {lines_carry} {NO_DIGESTS}",)
                    if n else ())
    out: dict[int, str] = {}
    for i, ((field, got), entry) in enumerate(zip(lines, decisions, strict=True)):
        if got is None:
            why = ("it carries no digest while the trace's other decision lines do" if own
                   else "it carries no digest while the trace's human-answer / "
                   "tool-outcome lines do")
        elif not isinstance(got, str):
            why = f"its digest is not a string ({_short(got)})"
        elif got != entry.digest():
            why = "its fields hash to another digest"
        else:
            continue
        line = field.split(".", 1)[0]
        out[i] = (f"decision {entry.outcome}/{entry.reason} of "
                  f"{entry.task or entry.action or 'an action'!r} ({line}) does not match "
                  f"its digest: {why} (the trace was edited or damaged)")
    warnings = tuple(f"{file}: {why}; the protected action it decides is INVALID"
                     for why in out.values())
    return out, warnings


def _short(v: Any) -> str:
    r = repr(v)
    return r if len(r) <= 60 else r[:57] + "..."


__all__ = [
    "NO_DIGESTS",
    "OUTCOMES",
    "check_record_line",
    "check_record_links",
    "checked_decision",
    "decision_digest_problems",
    "gate_span_decision",
    "record_id_problems",
]
