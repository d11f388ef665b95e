"""Arguments bound to the plan (planfence App. A.3 step 1).

The proposed action root derives from the planned records, so its arguments are what
the plan authorizes.

A root record binds an action by carrying, in its content, the action name and the
canonical arguments (or their sha256 digest) under :data:`ACTION_FIELD`::

    {"planfence.action": {"name": "book", "args": {"destination": "Porto"}}, ...}

The fence blocks a call ``args_mismatch`` unless exactly one of its roots binds an action,
the action is the tool's, and the call's canonical arguments equal the bound ones. A
model's tool call therefore becomes an *action record* (:func:`action_record`) derived
from the plan and its inputs; that record is the root the gate validates. Pure code.
"""

from __future__ import annotations

import enum
import hashlib
import math
from collections.abc import Mapping, Sequence
from typing import Any

from icore.errors import MalformedRecord
from icore.fence._reason_table import NOT_FINITE
from icore.fence._tool import RecordRef
from icore.records import JSONValue, Record, canonical_json

ACTION_FIELD = "planfence.action"
"""Content field of a record that binds an action and its arguments."""

_REF = "$planfence.ref"


def non_finite_paths(value: Any, where: str = "", *, limit: int = 8) -> list[str]:
    """The dotted paths of the NaN and infinite floats in ``value`` (at most ``limit``).

    A call's arguments hold none in JSON (strict JSON has no such number, a trace could
    not hold it), so each is an argument problem named :data:`NOT_FINITE` and the call
    is refused ``invalid_arguments`` on every path (#29, QA qa-new13a S4). Walks mappings
    and lists without recursion; ``""`` names the value itself (``"(arguments)"``).
    """
    out: list[str] = []
    todo: list[tuple[Any, str]] = [(value, where)]
    while todo and len(out) < limit:
        v, at = todo.pop()
        if isinstance(v, float) and not math.isfinite(v):
            out.append(at or "(arguments)")
        elif isinstance(v, Mapping):
            todo.extend((x, f"{at}.{k}" if at else str(k)) for k, x in reversed(list(v.items())))
        elif isinstance(v, list | tuple):
            todo.extend((x, f"{at}.{i}" if at else str(i))
                        for i, x in reversed(list(enumerate(v))))
    return out


def _canon(value: Any, path: str) -> JSONValue:
    if isinstance(value, RecordRef):
        return {_REF: {"key": value.key, "id": value.id}}
    if isinstance(value, Mapping):
        out: dict[str, JSONValue] = {}
        for k, v in value.items():
            if not isinstance(k, str):
                raise MalformedRecord(f"argument key {k!r} is not a string", field=path)
            out[k] = _canon(v, f"{path}.{k}")
        return out
    if isinstance(value, list | tuple):
        return [_canon(v, f"{path}[{i}]") for i, v in enumerate(value)]
    if value is None or isinstance(value, str | bool | int):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise MalformedRecord(f"argument {path[5:]!r} is {value!r}, which has no JSON "
                                  "form", field=path, argument=path[5:],
                                  problem=NOT_FINITE)
        return value
    raise _not_json(value, path)


def _not_json(value: Any, path: str) -> MalformedRecord:
    """The error for a Python value with no JSON form: the argument, its type, the fix."""
    name = path[5:] if path.startswith("args.") else path
    kind = type(value).__name__
    if isinstance(value, enum.Enum):
        example = f"{value.value!r} ({kind}.{value.name}.value)"
    elif callable(getattr(value, "isoformat", None)):  # date, datetime, time
        example = f"{value.isoformat()!r} (.isoformat())"
    elif kind in ("UUID", "Decimal"):
        example = f"{str(value)!r} (str(...))"
    else:
        example = "its JSON form"
    return MalformedRecord(
        f"argument {name!r} is a {kind}, not JSON: bind the JSON form the tool's schema "
        "gives the model", field=path, argument=name, got=kind,
        fix=f"bind {example}, or normalise all arguments through the tool's schema: "
        "icore.integrations.normalize_args(<the tool function or its args_schema>, args)")


def canonical_args(args: Mapping[str, Any]) -> dict[str, JSONValue]:
    """Return the canonical JSON form of a call's keyword arguments.

    :class:`~icore.fence.RecordRef` values become ``{"$planfence.ref": {"key", "id"}}``,
    tuples become lists; everything else must already be JSON. Python values with a JSON
    form the tool's schema gives (``date``, ``datetime``, ``UUID``, ``Decimal``, an
    ``Enum``) are refused, not converted: only the tool's schema knows their form (e.g.
    ``datetime`` with ``Z`` or ``+00:00``), and a guessed form would not match the call.

    Raises:
        MalformedRecord: an argument is not JSON (non-string key, NaN, a ``date``, a
            ``UUID``, an object, ...); fields ``argument`` (its path), ``got`` (its type)
            and ``fix`` (its JSON form, or ``normalize_args``).
    """
    if not isinstance(args, Mapping):
        raise MalformedRecord("arguments must be a mapping of names to values", field="args")
    out = _canon(args, "args")
    canonical_json(out)  # raises MalformedRecord for non-JSON values
    assert isinstance(out, dict)
    return out


def _digest(canon: JSONValue) -> str:
    return hashlib.sha256(canonical_json(canon)).hexdigest()


def bind_action(action: str, args: Mapping[str, Any], *, digest: bool = False
                ) -> dict[str, JSONValue]:
    """Return the content fragment that binds ``action`` with ``args`` to a record.

    Merge it into a plan's or an action record's content. With ``digest`` only the
    sha256 of the canonical arguments is stored (large arguments); a replanner must then
    pass the arguments in :class:`~icore.fence.Replan`.

    Raises:
        MalformedRecord: ``action`` is empty or an argument is not JSON.
    """
    if not isinstance(action, str) or not action:
        raise MalformedRecord("the action name must be a non-empty string", field="action")
    canon = canonical_args(args)
    body: dict[str, JSONValue] = {"name": action}
    if digest:
        body["args_sha256"] = _digest(canon)
    else:
        body["args"] = canon
    return {ACTION_FIELD: body}


def action_record(*, key: str, owner: str, seq: int, action: str, args: Mapping[str, Any],
                  inputs: Sequence[Record] | Mapping[str, Record],
                  content: Mapping[str, JSONValue] | None = None, digest: bool = False,
                  type: str = "action") -> Record:
    """Create the derived action record for one tool call.

    It cites the plan and the inputs the call reads (exact parents) and binds the action
    and its arguments.

    Args:
        key: the action record's key (as in :meth:`icore.records.Record.create`).
        owner: its owner.
        seq: its owner sequence.
        action: the protected tool's name.
        args: the call's keyword arguments.
        inputs: the plan record and the records the call derives from.
        content: extra content fields (kept next to :data:`ACTION_FIELD`).
        digest: bind only the arguments' digest.
        type: record type.

    Raises:
        MalformedRecord: a field is invalid or an argument is not JSON.
    """
    recs = list(inputs.values()) if isinstance(inputs, Mapping) else list(inputs)
    body: dict[str, JSONValue] = dict(content or {})
    body.update(bind_action(action, args, digest=digest))
    return Record.create(key=key, owner=owner, seq=seq, content=body,
                         parents=[r.id for r in recs], type=type)


def _decode(value: JSONValue) -> Any:
    if isinstance(value, dict):
        ref = value.get(_REF) if len(value) == 1 else None
        if isinstance(ref, dict) and set(ref) == {"key", "id"}:
            return RecordRef(str(ref["key"]), str(ref["id"]))
        return {k: _decode(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_decode(v) for v in value]
    return value


def binding_of(record: Record) -> tuple[str, dict[str, Any] | None, str] | None:
    """Return ``(action, args or None, args digest)`` a record binds, or None.

    ``args`` is None for a digest-only binding. A malformed binding returns
    ``("", None, "")`` (it binds nothing a call can match).
    """
    content = record.content
    if not isinstance(content, dict) or ACTION_FIELD not in content:
        return None
    body = content[ACTION_FIELD]
    if not isinstance(body, dict) or not isinstance(body.get("name"), str):
        return ("", None, "")
    if "args" in body and isinstance(body["args"], dict):
        return (body["name"], _decode(body["args"]), _digest(body["args"]))
    if isinstance(body.get("args_sha256"), str):
        return (body["name"], None, body["args_sha256"])
    return ("", None, "")


def args_digest(args: Mapping[str, Any]) -> str:
    """Return the sha256 hex of a call's canonical arguments.

    Raises:
        MalformedRecord: an argument is not JSON.
    """
    return _digest(canonical_args(args))
