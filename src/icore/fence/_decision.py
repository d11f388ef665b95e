"""Gate decisions and their reasons (planfence Alg. 1 outcomes)."""

from __future__ import annotations

import enum
import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from icore.errors import FenceError, brief
from icore.records import Record, RecordId

_DIGEST_DOMAIN = b"icore.decision.v1\n"
"""What a decision's digest hashes before its canonical JSON (``DecisionEntry.digest``):
the hash of no other kind of object can pass for one."""


class Outcome(enum.StrEnum):
    """The three outcomes of planfence Alg. 1."""

    AUTHORIZED = "authorized"
    """Lineage-valid at the logged validation point (Alg. 1 line 13)."""
    REPLAN_REQUIRED = "replan_required"
    """A dependency changed; fresh verified records are attached (line 12)."""
    BLOCKED = "blocked"
    """Validation could not establish lineage validity (lines 3, 7, 11)."""


class Reason(enum.StrEnum):
    """Why the gate decided what it decided (stable codes for logs and reports)."""

    VALID = "valid"
    """F_a(x) == H(x) for every x in D(a)."""
    STALE = "stale"
    """Some F_a(x) != H(x) on the first validation: replan required."""
    SECOND_CHANGE = "second_change"
    """A dependency changed again after the one replan: blocked."""
    INCOMPLETE_DECLARATION = "incomplete_declaration"
    """D(a) is empty, invalid, or misses a key the action's arguments read."""
    LINEAGE_INCOMPLETE = "lineage_incomplete"
    """A root or parent reached from the roots is missing (Alg. 1 line 2)."""
    MISSING_BOUNDARY = "missing_boundary"
    """A key of D(a) is never reached from the roots (Alg. 1 line 2)."""
    FRONTIER_CONFLICT = "frontier_conflict"
    """Two versions of one key of D(a) are reached from the roots."""
    NO_OWNER = "no_owner"
    """A key of D(a) has no owner mapping (Alg. 1 line 2)."""
    OWNER_UNAVAILABLE = "owner_unavailable"
    """An owner did not answer (down, timed out, refused) (Alg. 1 line 6)."""
    MALFORMED_HEAD = "malformed_head"
    """An owner reply is malformed (Alg. 1 line 6)."""
    WRONG_KEY = "wrong_key"
    """An owner reply identifies another key or omits one asked for (line 6)."""
    CONFLICTING_OWNER = "conflicting_owner"
    """A reply comes from another owner than the one asked (line 6)."""
    CONFLICTING_REPLY = "conflicting_reply"
    """A reply carries more than one entry for one key (line 6: conflicting response)."""
    ARGS_MISMATCH = "args_mismatch"
    """The call's arguments are not the ones its roots bind (planfence A.3 step 1)."""
    FETCH_FAILED = "fetch_failed"
    """A changed record could not be fetched or did not verify (line 8)."""
    FAIL_OPEN = "fail_open"
    """ABLATION ONLY: a blocked decision was turned into an authorization."""
    NOT_VALIDATED = "not_validated"
    """An unsafe baseline policy authorized without checking lineage."""


INFRASTRUCTURE_REASONS = frozenset({
    Reason.INCOMPLETE_DECLARATION, Reason.LINEAGE_INCOMPLETE, Reason.MISSING_BOUNDARY,
    Reason.FRONTIER_CONFLICT, Reason.NO_OWNER, Reason.OWNER_UNAVAILABLE,
    Reason.MALFORMED_HEAD, Reason.WRONG_KEY, Reason.CONFLICTING_OWNER, Reason.FETCH_FAILED,
    Reason.CONFLICTING_REPLY,
})
"""Blocked reasons that come from incomplete validation rather than a second change."""


@dataclass(frozen=True, slots=True)
class GateDecision:
    """One gate decision with every input it was made from (logged as is).

    Attributes:
        outcome: :class:`Outcome`.
        reason: :class:`Reason`.
        action: the action name.
        roots: L(a).
        deps: D(a), sorted.
        frontier: F_a(x) for the keys the traversal reached.
        heads: H(x) as reported by the owners.
        fresh: verified current records for changed keys (replan input).
        replanned: the flag the gate was called with.
        point: the validation point: a per-gate monotone counter.
        at_ms: clock time of the validation point, in ms.
        policy: name of the policy that decided.
        detail: human-readable detail (error text).
        owners_contacted: number of owners queried.
        heads_checked: number of head items queried.
    """

    outcome: Outcome
    reason: Reason
    action: str
    roots: tuple[RecordId, ...]
    deps: tuple[str, ...]
    frontier: Mapping[str, RecordId] = field(default_factory=dict)
    heads: Mapping[str, RecordId] = field(default_factory=dict)
    fresh: Mapping[str, Record] = field(default_factory=dict)
    replanned: bool = False
    point: int = 0
    at_ms: float = 0.0
    policy: str = "planfence"
    detail: str = ""
    owners_contacted: int = 0
    heads_checked: int = 0

    @property
    def authorized(self) -> bool:
        """True when the action may execute."""
        return self.outcome is Outcome.AUTHORIZED

    def entry(self, task: str | None = None) -> DecisionEntry:
        """The decision as a :class:`DecisionEntry` (fresh records by id) for logs.

        Args:
            task: the protected call the decision belongs to (recorders group by it);
                None leaves it out.
        """
        return DecisionEntry(
            self.outcome.value, self.reason.value, self.action, tuple(self.roots),
            tuple(self.deps), dict(self.frontier), dict(self.heads),
            {k: r.id for k, r in self.fresh.items()}, self.replanned, self.point,
            self.at_ms, self.policy, self.detail, self.owners_contacted,
            self.heads_checked, task)

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-ready dict (fresh records by id) for the decision log.

        The same as ``self.entry().to_dict()``; :meth:`DecisionEntry.from_dict` reads it.
        """
        return self.entry().to_dict()


class DecisionFormatError(FenceError, ValueError):
    """A logged gate decision (a :meth:`DecisionEntry.to_dict` object) is malformed.

    ``fields["field"]`` names the offending field (``<where>.<name>``).
    """


@dataclass(frozen=True, slots=True)
class DecisionEntry:
    """One gate decision as a log, a recording, a live run or a report carries it.

    The typed form of :meth:`GateDecision.to_dict` (planfence Alg. 1 inputs and
    outcome); :meth:`to_dict` and :meth:`from_dict` are inverses. Outcome and reason are
    kept as recorded (an :class:`Outcome` / :class:`Reason` value, or an unknown code
    written by another version).

    Attributes:
        outcome: the :class:`Outcome` value (``authorized``, ``replan_required``,
            ``blocked``).
        reason: the :class:`Reason` value.
        action: the action name.
        roots: L(a).
        deps: D(a).
        frontier: F_a(x), key -> record id.
        heads: H(x) as reported by the owners, key -> record id.
        fresh: the fresh verified records for changed keys, key -> record id.
        replanned: the flag the gate was called with.
        point: the validation point (per-gate monotone counter).
        at_ms: clock time of the validation point, in ms.
        policy: name of the policy that decided.
        detail: human-readable detail.
        owners_contacted: number of owners queried.
        heads_checked: number of head items queried.
        task: the protected call the decision belongs to (recorders, live runs); None
            when not recorded.
        error: the error of the tool this decision authorized when it then failed
            (raised or was cancelled: ``"RuntimeError: carrier down"``; recorders write
            it on the call's last decision, issue 28); None: no failure recorded. The
            tool's outcome, not the gate's: the decision's verdict is unchanged.
        may_have_run: with :attr:`error`, whether the failure leaves the call's effect
            open (a timeout, a cancellation or an interrupt while the tool ran, an
            answer lost after the call was sent: the audit counts it ``outcome
            unknown``); recorders write it with every ``error`` since #29. None: not
            recorded (an older trace: the audit then reads the error's text).
    """

    outcome: str
    reason: str
    action: str = ""
    roots: tuple[RecordId, ...] = ()
    deps: tuple[str, ...] = ()
    frontier: Mapping[str, RecordId] = field(default_factory=dict)
    heads: Mapping[str, RecordId] = field(default_factory=dict)
    fresh: Mapping[str, RecordId] = field(default_factory=dict)
    replanned: bool = False
    point: int = 0
    at_ms: float = 0.0
    policy: str = ""
    detail: str = ""
    owners_contacted: int = 0
    heads_checked: int = 0
    task: str | None = None
    error: str | None = None
    may_have_run: bool | None = None

    @property
    def authorized(self) -> bool:
        """True when the decision authorized the action."""
        return self.outcome == Outcome.AUTHORIZED.value

    def digest(self) -> str:
        """The decision's digest: sha256 hex (64 digits) of everything it records.

        Over a domain tag (``icore.decision.v1``) and the canonical JSON of
        :meth:`to_dict` (``at_ms`` as a float, so an integer time read back as one
        digests alike): the outcome and
        reason, the roots (the plan and action records, whose ids bind the call's
        arguments), D(a), the frontier, heads and fresh record ids, the validation point,
        policy, detail, ``task``, ``error`` and ``may_have_run``. Recorders write it on
        every decision line (:meth:`to_dict` with ``digest=True``); ``icore audit``
        recomputes it, so a decision edited after recording (``stale`` made
        ``authorized``, a head changed) no longer matches (#29). A plain digest, not a
        signature: it catches an edit that leaves the digest as written, not a writer
        who recomputes it. Never raises: the JSON is ASCII (a lone surrogate in a tool's
        error text is escaped, as a trace line holds it), a non-finite time is hashed
        as its token (the importer refuses such a line before).
        """
        d = self.to_dict()
        d["at_ms"] = float(self.at_ms)
        text = json.dumps(d, sort_keys=True, separators=(",", ":"), default=str)
        return hashlib.sha256(_DIGEST_DOMAIN + text.encode("ascii")).hexdigest()

    def to_dict(self, *, digest: bool = False) -> dict[str, Any]:
        """The JSON-ready dict, keys in the decision log's order (``task``, ``error`` last).

        ``may_have_run`` when recorded; ``digest`` (:meth:`digest`) with ``digest=True``
        (what recorders write on a decision line, #29).
        """
        d: dict[str, Any] = {
            "outcome": self.outcome,
            "reason": self.reason,
            "action": self.action,
            "roots": list(self.roots),
            "deps": list(self.deps),
            "frontier": dict(self.frontier),
            "heads": dict(self.heads),
            "fresh": dict(self.fresh),
            "replanned": self.replanned,
            "point": self.point,
            "at_ms": self.at_ms,
            "policy": self.policy,
            "detail": self.detail,
            "owners_contacted": self.owners_contacted,
            "heads_checked": self.heads_checked,
        }
        if self.task is not None:
            d["task"] = self.task
        if self.error is not None:
            d["error"] = self.error
        if self.may_have_run is not None:
            d["may_have_run"] = self.may_have_run
        if digest:
            d["digest"] = self.digest()
        return d

    @classmethod
    def from_dict(cls, obj: Any, *, where: str = "decision") -> DecisionEntry:
        """Read a logged decision back (the inverse of :meth:`to_dict`).

        Lenient as the importers have always been: ``outcome`` and ``reason`` are
        required; every other field may be missing (it then reads as empty, 0, False
        or ""); ids and keys are read as strings; unknown fields are ignored, and so is
        ``digest`` (the audit's importer compares it with :meth:`digest`).

        Args:
            obj: the decoded JSON object.
            where: where ``obj`` sits (prefix of the field named by an error).

        Returns:
            The :class:`DecisionEntry`.

        Raises:
            DecisionFormatError: ``obj`` is not an object; ``outcome``/``reason`` is
                missing or not a string or number; ``frontier``/``heads`` is not an
                object; ``roots``/``deps`` is not a list; ``policy``/``detail`` is not a
                string or number; ``point`` is not an integer >= 0; ``replanned`` is not
                a boolean; ``error`` is not a string or number; ``may_have_run`` is
                given but not a JSON boolean.
        """
        if not isinstance(obj, Mapping):
            raise DecisionFormatError("a decision must be an object", field=where)
        outcome = _text(obj.get("outcome"), f"{where}.outcome", required=True)
        reason = _text(obj.get("reason"), f"{where}.reason", required=True)
        maps = {}
        for k in ("frontier", "heads"):
            v = obj.get(k, {})
            if not isinstance(v, Mapping):
                raise DecisionFormatError(f"{k} must be an object of key -> record id",
                                          field=f"{where}.{k}")
            maps[k] = {str(a): str(b) for a, b in v.items()}
        lists = {}
        for k in ("roots", "deps"):
            v = obj.get(k, [])
            if not isinstance(v, list | tuple):
                raise DecisionFormatError(f"{k} must be a list", field=f"{where}.{k}")
            lists[k] = tuple(str(x) for x in v)
        policy = _text(obj.get("policy"), f"{where}.policy")
        detail = _text(obj.get("detail"), f"{where}.detail")
        point = obj.get("point")
        if point is not None and (not isinstance(point, int) or isinstance(point, bool)
                                  or point < 0):
            raise DecisionFormatError(f"must be an integer >= 0, not {brief(point)}",
                                      field=f"{where}.point")
        fresh = obj.get("fresh")
        action, task = obj.get("action"), obj.get("task")
        error = obj.get("error")
        if error is not None:
            error = _text(error, f"{where}.error")
        open_ = obj.get("may_have_run")
        if open_ is not None and not isinstance(open_, bool):
            raise DecisionFormatError(f"must be true or false, not {brief(open_)}",
                                      field=f"{where}.may_have_run")
        return cls(
            outcome=outcome, reason=reason,
            action="" if action is None else str(action),
            roots=lists["roots"], deps=lists["deps"],
            frontier=maps["frontier"], heads=maps["heads"],
            fresh={str(a): str(b) for a, b in fresh.items()}
            if isinstance(fresh, Mapping) else {},
            replanned=_flag(obj.get("replanned"), f"{where}.replanned"),
            point=point or 0, at_ms=_number(obj.get("at_ms")),
            policy=policy, detail=detail,
            owners_contacted=_whole(obj.get("owners_contacted")),
            heads_checked=_whole(obj.get("heads_checked")),
            task=None if task is None else str(task), error=error, may_have_run=open_)


def _text(v: Any, field: str, *, required: bool = False) -> str:
    """A string field (a number reads as its text); missing reads as ""."""
    if v is None:
        if required:
            raise DecisionFormatError("missing field", field=field)
        return ""
    if isinstance(v, str):
        return v
    if isinstance(v, int | float) and not isinstance(v, bool):
        return str(v)
    raise DecisionFormatError(f"expected a string, got {type(v).__name__}", field=field)


_TRUE = frozenset({"true", "yes", "1", "y", "t"})
_FALSE = frozenset({"false", "no", "0", "n", "f"})


def _flag(v: Any, field: str) -> bool:
    """A boolean field (``true``/``"false"``/``0``/``1`` as the importers read them)."""
    if v is None:
        return False
    if isinstance(v, bool):
        return v
    if isinstance(v, int) and v in (0, 1):
        return bool(v)
    if isinstance(v, str):
        s = v.strip().lower()
        if s in _TRUE:
            return True
        if s in _FALSE or not s:
            return False
    raise DecisionFormatError(f"not a boolean: {brief(v)}", field=field)


def _number(v: Any) -> float:
    """A number field as recorded (an int stays an int: the round trip is exact)."""
    return v if isinstance(v, int | float) and not isinstance(v, bool) else 0.0


def _whole(v: Any) -> int:
    return v if isinstance(v, int) and not isinstance(v, bool) else 0
