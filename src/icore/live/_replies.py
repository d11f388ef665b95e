"""Typed results of an agent's steps: the ``result`` of a :class:`~icore.live._messages.Reply`.

planfence App. A.2-A.3. Each step answers with one of these frozen types; ``to_dict``
gives exactly the object the agent wrote before #26 (so the control line, sorted-key
JSON, is byte-identical) and ``from_dict`` reads it back (``from_dict(o).to_dict() ==
o`` for every object an agent writes)::

    seed / revise / catalog   CommittedRecord   the record committed and published
    shortlist                 ShortlistReply    decision (+ the shortlist record)
    plan / replan             PlanReply         decision (+ the plan record and its args)
    execute                   ExecuteReply      decision, the gate's decisions, the action
    audit                     AuditReply        decision, consistency (+ verdict record)
    peers                     PeersReply        owner addresses learned
    ping                      PingReply         liveness
    stats                     StatsReply        traffic and memory counters

A role decision (``decision``) stays the mapping
:meth:`icore.agents.DecisionOutcome.to_dict` wrote; record content stays the JSON value
the owner committed. ``from_dict`` raises :class:`~icore.live._errors.ReplyFormatError`
naming the field (``<step>.<field>``) for a missing or mistyped field, so a malformed
answer fails its step closed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from icore.fence import DecisionEntry
from icore.live._errors import ReplyFormatError
from icore.records import Record

JSON = Any
"""A JSON value as :func:`json.loads` returns it."""


def _obj(obj: Any, where: str) -> Mapping[str, JSON]:
    if not isinstance(obj, Mapping):
        raise ReplyFormatError(f"expected an object, got {type(obj).__name__}", field=where)
    return obj


def _str(v: Any, where: str) -> str:
    if not isinstance(v, str):
        raise ReplyFormatError(f"expected a string, got {type(v).__name__}", field=where)
    return v


def _int(v: Any, where: str) -> int:
    if not isinstance(v, int) or isinstance(v, bool):
        raise ReplyFormatError(f"expected an integer, got {type(v).__name__}", field=where)
    return v


def _strs(v: Any, where: str) -> tuple[str, ...]:
    if not isinstance(v, list | tuple):
        raise ReplyFormatError(f"expected a list, got {type(v).__name__}", field=where)
    return tuple(_str(x, f"{where}[{i}]") for i, x in enumerate(v))


def _field(obj: Mapping[str, JSON], name: str, where: str) -> JSON:
    if name not in obj:
        raise ReplyFormatError("missing field", field=f"{where}.{name}")
    return obj[name]


def _decision(obj: Mapping[str, JSON], where: str) -> Mapping[str, JSON]:
    return _obj(_field(obj, "decision", where), f"{where}.decision")


def _opt_record(obj: Mapping[str, JSON], where: str) -> CommittedRecord | None:
    rec = obj.get("record")
    return None if rec is None else CommittedRecord.from_dict(rec, where=f"{where}.record")


@dataclass(frozen=True, slots=True)
class CommittedRecord:
    """A record an agent committed and published, as its reply reports it.

    The answer of ``seed``, ``revise`` and ``catalog``, and the ``record`` of the other
    steps' replies. Ids stay out of model prompts; the coordinator rebuilds the record
    from these fields and keeps it only when they hash to ``id``.

    Attributes:
        id / key / owner / seq / parents / type / content / supersedes: the record's
            (:class:`icore.records.Record`; ``supersedes`` None: not written).
        replication_failed: agents the record could not be replicated to.
    """

    id: str
    key: str
    owner: str
    seq: int
    type: str
    parents: tuple[str, ...] = ()
    content: JSON = None
    supersedes: str | None = None
    replication_failed: tuple[str, ...] = ()

    @classmethod
    def of(cls, rec: Record, replication_failed: tuple[str, ...] = ()) -> CommittedRecord:
        """The reply for ``rec`` once it was published."""
        return cls(rec.id, rec.key, rec.owner, rec.seq, rec.type, tuple(rec.parents),
                   rec.content, rec.supersedes, replication_failed)

    def to_dict(self) -> dict[str, JSON]:
        """The wire object."""
        d: dict[str, JSON] = {"id": self.id, "key": self.key, "owner": self.owner,
                              "seq": self.seq, "parents": list(self.parents),
                              "type": self.type, "content": self.content}
        if self.supersedes is not None:
            d["supersedes"] = self.supersedes
        d["replication_failed"] = list(self.replication_failed)
        return d

    @classmethod
    def from_dict(cls, obj: Any, *, where: str = "record") -> CommittedRecord:
        """Read a committed record's reply.

        Raises:
            ReplyFormatError: not an object; ``id``, ``key``, ``owner``, ``type`` or
                ``supersedes`` not a string, ``seq`` not an integer, ``parents`` or
                ``replication_failed`` not a list of strings, a field missing
                (``supersedes`` may be).
        """
        o = _obj(obj, where)
        sup = o.get("supersedes")
        return cls(
            id=_str(_field(o, "id", where), f"{where}.id"),
            key=_str(_field(o, "key", where), f"{where}.key"),
            owner=_str(_field(o, "owner", where), f"{where}.owner"),
            seq=_int(_field(o, "seq", where), f"{where}.seq"),
            type=_str(_field(o, "type", where), f"{where}.type"),
            parents=_strs(_field(o, "parents", where), f"{where}.parents"),
            content=_field(o, "content", where),
            supersedes=None if sup is None else _str(sup, f"{where}.supersedes"),
            replication_failed=_strs(_field(o, "replication_failed", where),
                                     f"{where}.replication_failed"))


@dataclass(frozen=True, slots=True)
class ShortlistReply:
    """The retriever's ``shortlist``: its role decision, then the shortlist record.

    Attributes:
        decision: the role outcome (:meth:`icore.agents.DecisionOutcome.to_dict`).
        record: the committed shortlist (None: the decision failed, nothing committed).
    """

    decision: Mapping[str, JSON]
    record: CommittedRecord | None = None

    def to_dict(self) -> dict[str, JSON]:
        """The wire object (``record`` only when one was committed)."""
        d: dict[str, JSON] = {"decision": dict(self.decision)}
        if self.record is not None:
            d["record"] = self.record.to_dict()
        return d

    @classmethod
    def from_dict(cls, obj: Any, *, where: str = "shortlist") -> ShortlistReply:
        """Read a ``shortlist`` result.

        Raises:
            ReplyFormatError: not an object, no ``decision`` object, a bad ``record``.
        """
        o = _obj(obj, where)
        return cls(_decision(o, where), _opt_record(o, where))


@dataclass(frozen=True, slots=True)
class PlanReply:
    """The planner's ``plan`` or ``replan``: its decision, the plan and the action's args.

    Attributes:
        decision: the role outcome (:meth:`icore.agents.DecisionOutcome.to_dict`).
        record: the committed plan (None: the decision failed, nothing committed).
        args: the arguments the plan binds (``task``, ``option``; None with no plan).
    """

    decision: Mapping[str, JSON]
    record: CommittedRecord | None = None
    args: Mapping[str, JSON] | None = None

    def to_dict(self) -> dict[str, JSON]:
        """The wire object (``record`` and ``args`` only when a plan was committed)."""
        d: dict[str, JSON] = {"decision": dict(self.decision)}
        if self.record is not None:
            d["record"] = self.record.to_dict()
        if self.args is not None:
            d["args"] = dict(self.args)
        return d

    @classmethod
    def from_dict(cls, obj: Any, *, where: str = "plan") -> PlanReply:
        """Read a ``plan`` / ``replan`` result.

        Raises:
            ReplyFormatError: not an object, no ``decision`` object, a bad ``record``,
                ``args`` not an object.
        """
        o = _obj(obj, where)
        args = o.get("args")
        return cls(_decision(o, where), _opt_record(o, where),
                   None if args is None else _obj(args, f"{where}.args"))


@dataclass(frozen=True, slots=True)
class ExecuteReply:
    """The executor's result of ``execute`` (planfence App. A.3).

    Its role decision, then the protected action through the gate.

    Attributes:
        decision: the executor's role outcome (:meth:`icore.agents.DecisionOutcome.to_dict`).
        executed: the protected action ran.
        outcome: the gate's last outcome (``authorized``, ``blocked``, ...); None when the
            role decision failed and the gate was never asked (the reply then carries
            only ``decision`` and ``executed``).
        replanned / roots / args / detail: as :class:`icore.fence.ActionResult` says.
        decisions: every gate decision of the call, typed.
        replan_replies: the planner's answers to the one replan (None for a failed call).
        root_parents: executed root id -> its exact parents.
        record: the committed action record (None when nothing ran).
    """

    decision: Mapping[str, JSON]
    executed: bool = False
    outcome: str | None = None
    replanned: bool = False
    roots: tuple[str, ...] = ()
    args: Mapping[str, JSON] = field(default_factory=dict)
    detail: JSON = ""
    decisions: tuple[DecisionEntry, ...] = ()
    replan_replies: tuple[PlanReply | None, ...] = ()
    root_parents: Mapping[str, list[str]] = field(default_factory=dict)
    record: CommittedRecord | None = None

    def to_dict(self) -> dict[str, JSON]:
        """The wire object (exactly the keys the agent wrote before #26)."""
        d: dict[str, JSON] = {"decision": dict(self.decision), "executed": self.executed}
        if self.outcome is None:
            return d
        d.update({"replanned": self.replanned, "roots": list(self.roots),
                  "args": dict(self.args), "detail": self.detail, "outcome": self.outcome,
                  "decisions": [e.to_dict() for e in self.decisions],
                  "replan_replies": [None if r is None else r.to_dict()
                                     for r in self.replan_replies],
                  "root_parents": {k: list(v) for k, v in self.root_parents.items()}})
        if self.record is not None:
            d["record"] = self.record.to_dict()
        return d

    @classmethod
    def from_dict(cls, obj: Mapping[str, JSON], *, where: str = "execute") -> ExecuteReply:
        """Read an ``execute`` result (missing fields read as empty).

        Raises:
            icore.fence.DecisionFormatError: a gate decision is malformed (the field
                names it, e.g. ``execute.decisions[0].outcome``).
            ReplyFormatError: a replan reply or the action record is malformed.
        """
        outcome = obj.get("outcome")
        return cls(
            decision=obj.get("decision") or {}, executed=bool(obj.get("executed")),
            outcome=None if outcome is None else str(outcome),
            replanned=bool(obj.get("replanned")), roots=tuple(obj.get("roots") or ()),
            args=obj.get("args") or {}, detail=obj.get("detail", ""),
            decisions=tuple(DecisionEntry.from_dict(d, where=f"{where}.decisions[{i}]")
                            for i, d in enumerate(obj.get("decisions") or [])),
            replan_replies=tuple(
                None if r is None else PlanReply.from_dict(
                    r, where=f"{where}.replan_replies[{i}]")
                for i, r in enumerate(obj.get("replan_replies") or ())),
            root_parents=obj.get("root_parents") or {}, record=_opt_record(obj, where))


@dataclass(frozen=True, slots=True)
class AuditReply:
    """The auditor's ``audit``: the outcome checked against the owner's head now.

    Attributes:
        decision: the role outcome (:meth:`icore.agents.DecisionOutcome.to_dict`).
        consistent: the executed option matches the current requirement (ground truth
            the auditor's decision is scored against).
        current_requirement: id of the owner's head of the requirement, read now.
        record: the committed verdict record (None: the decision failed).
        verdict: ``accept``, ``reject`` or ``repeat_action`` (None: the decision failed).
    """

    decision: Mapping[str, JSON]
    consistent: bool
    current_requirement: str
    record: CommittedRecord | None = None
    verdict: str | None = None

    def to_dict(self) -> dict[str, JSON]:
        """The wire object (``record`` and ``verdict`` only after a decision)."""
        d: dict[str, JSON] = {"decision": dict(self.decision), "consistent": self.consistent,
                              "current_requirement": self.current_requirement}
        if self.record is not None:
            d["record"] = self.record.to_dict()
        if self.verdict is not None:
            d["verdict"] = self.verdict
        return d

    @classmethod
    def from_dict(cls, obj: Any, *, where: str = "audit") -> AuditReply:
        """Read an ``audit`` result.

        Raises:
            ReplyFormatError: not an object; no ``decision`` object; ``consistent`` not
                a boolean; ``current_requirement`` or ``verdict`` not a string; a bad
                ``record``.
        """
        o = _obj(obj, where)
        consistent = _field(o, "consistent", where)
        if not isinstance(consistent, bool):
            raise ReplyFormatError(f"expected a boolean, got {type(consistent).__name__}",
                                   field=f"{where}.consistent")
        verdict = o.get("verdict")
        return cls(_decision(o, where), consistent,
                   _str(_field(o, "current_requirement", where),
                        f"{where}.current_requirement"),
                   _opt_record(o, where),
                   None if verdict is None else _str(verdict, f"{where}.verdict"))


@dataclass(frozen=True, slots=True)
class PeersReply:
    """The answer to ``peers``: how many owner addresses the agent learned."""

    peers: int

    def to_dict(self) -> dict[str, JSON]:
        """The wire object."""
        return {"peers": self.peers}

    @classmethod
    def from_dict(cls, obj: Any, *, where: str = "peers") -> PeersReply:
        """Read a ``peers`` result.

        Raises:
            ReplyFormatError: not an object, ``peers`` missing or not an integer.
        """
        o = _obj(obj, where)
        return cls(_int(_field(o, "peers", where), f"{where}.peers"))


@dataclass(frozen=True, slots=True)
class PingReply:
    """The answer to ``ping``: the agent is alive (its id and role)."""

    agent: str
    role: str

    def to_dict(self) -> dict[str, JSON]:
        """The wire object."""
        return {"agent": self.agent, "role": self.role}

    @classmethod
    def from_dict(cls, obj: Any, *, where: str = "ping") -> PingReply:
        """Read a ``ping`` result.

        Raises:
            ReplyFormatError: not an object, ``agent`` or ``role`` missing or not a string.
        """
        o = _obj(obj, where)
        return cls(_str(_field(o, "agent", where), f"{where}.agent"),
                   _str(_field(o, "role", where), f"{where}.role"))


@dataclass(frozen=True, slots=True)
class StatsReply:
    """The answer to ``stats``: an agent's traffic and memory counters.

    Attributes:
        agent: the agent's id.
        external_actions: protected actions it ran.
        server / client: its owner service's and owner client's traffic counters (TCP
            backend; None: not running).
        records: records in its SQLite memory (TCP backend; None otherwise).
        nats: its engine client's counters (NATS backend; None otherwise).
    """

    agent: str
    external_actions: int = 0
    server: Mapping[str, JSON] | None = None
    client: Mapping[str, JSON] | None = None
    records: int | None = None
    nats: Mapping[str, JSON] | None = None

    def to_dict(self) -> dict[str, JSON]:
        """The wire object (the counters a backend has)."""
        d: dict[str, JSON] = {"agent": self.agent, "external_actions": self.external_actions}
        for k in ("server", "client", "records", "nats"):
            v = getattr(self, k)
            if v is not None:
                d[k] = dict(v) if isinstance(v, Mapping) else v
        return d

    @classmethod
    def from_dict(cls, obj: Any, *, where: str = "stats") -> StatsReply:
        """Read a ``stats`` result.

        Raises:
            ReplyFormatError: not an object; ``agent`` not a string;
                ``external_actions`` or ``records`` not an integer; ``server``,
                ``client`` or ``nats`` not an object.
        """
        o = _obj(obj, where)
        maps = {k: None if o.get(k) is None else _obj(o[k], f"{where}.{k}")
                for k in ("server", "client", "nats")}
        records = o.get("records")
        return cls(_str(_field(o, "agent", where), f"{where}.agent"),
                   _int(_field(o, "external_actions", where), f"{where}.external_actions"),
                   maps["server"], maps["client"],
                   None if records is None else _int(records, f"{where}.records"),
                   maps["nats"])
