"""Shared facts as versioned records, each session's reads, and the gate (the gateway's seam).

The one module of the gateway that touches :mod:`icore.memory` and :mod:`icore.fence`
(a small internal seam, so the gateway can move onto the high-level team API unchanged).

* A fact is a semantic key (an upstream resource URI, or a ``fact://`` key of the
  gateway's own key-value set) with an owner (planfence Sec. 3.1): its versions are
  records in the owner's store, each citing the version it replaces; the owner's head
  is the current version.
* :meth:`FactBook.observe` turns content the gateway just read (a session's
  ``resources/read``, a re-read after ``notifications/resources/updated`` or after a
  tool that writes it, a ``fact://`` write) into a new version when it differs from the
  head, under the owner rules of App. A (compare-and-set on the head).
* A session's *view* holds the version of each key it last saw. A protected call's plan
  is an action record (:func:`icore.fence.action_record`) citing those versions and
  binding the tool and its arguments; :meth:`FactBook.gate` validates it with
  planfence Alg. 1 (:class:`icore.fence.Fence`, only the owners of D(a) asked).
"""

from __future__ import annotations

import fnmatch
import itertools
import string
import threading
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from icore.errors import IcoreError
from icore.fence import (
    Fence,
    GateContext,
    GateDecision,
    GateValidator,
    Outcome,
    PointCounter,
    ProtectedTool,
    Reason,
    action_record,
)
from icore.memory import (
    DEFAULT_TIMEOUT_S,
    HeadReply,
    LocalOwners,
    MemoryStore,
    OwnershipMap,
    SQLiteStore,
    Store,
)
from icore.records import JSONValue, Record, RecordId

PLAN_OWNER = "mcp-gateway"
"""Owner id of the gateway's action records (the plans of protected calls)."""
PLAN_PREFIX = "mcp/plan/"


class AsyncLocalOwners:
    """:class:`icore.memory.AsyncOwnerAccess` over in-process stores, without threads.

    The stores answer from memory or a local SQLite file, so the gate awaits them inline
    (a worker thread per owner would cost more than the read). ``down`` owners raise
    :class:`icore.memory.OwnerUnavailable` (the gate blocks).
    """

    def __init__(self, local: LocalOwners) -> None:
        self.local = local

    async def query_heads(self, owner: str, keys: Sequence[str], *,
                          known: Mapping[str, RecordId] | None = None,
                          timeout_s: float = DEFAULT_TIMEOUT_S) -> HeadReply:
        """See :meth:`icore.memory.AsyncOwnerAccess.query_heads`."""
        return self.local.query_heads(owner, keys, known=known, timeout_s=timeout_s)

    async def fetch(self, owner: str, ids: Sequence[RecordId], *,
                    timeout_s: float = DEFAULT_TIMEOUT_S) -> list[Record]:
        """See :meth:`icore.memory.AsyncOwnerAccess.fetch`."""
        return self.local.fetch(owner, ids, timeout_s=timeout_s)


@dataclass
class SessionView:
    """What one client session saw: the version of each key it last read.

    Attributes:
        sid: the session's id in the trace (``<client name>#<n>``).
        seen: key -> the record (version) the session last saw.
        pending: tools whose last call was refused stale: the next call is the one
            replan (validated with ``replanned=True``).
        exhausted: tools refused ``second_change``: the session must read the changed
            keys again (a new plan) before the tool runs.
    """

    sid: str
    seen: dict[str, Record] = field(default_factory=dict)
    pending: set[str] = field(default_factory=set)
    exhausted: dict[str, set[str]] = field(default_factory=dict)

    def saw(self, rec: Record) -> None:
        """Record that the session saw ``rec`` (a read, or fresh values in a refusal)."""
        self.seen[rec.key] = rec
        for tool, keys in list(self.exhausted.items()):
            keys.discard(rec.key)
            if not keys:
                del self.exhausted[tool]
                self.pending.discard(tool)


@dataclass(frozen=True, slots=True)
class Verdict:
    """The gate's answer for one protected call.

    Attributes:
        decision: the :class:`icore.fence.GateDecision`.
        plan: the action record validated (None when the arguments are not JSON).
        deps: D(a) with the call's arguments filled in.
        changed: key -> the fresh record, for keys whose version changed since the
            session read them (or that it never read).
    """

    decision: GateDecision
    plan: Record | None
    deps: tuple[str, ...]
    changed: Mapping[str, Record]


def expand_deps(patterns: Iterable[str], args: Mapping[str, Any],
                known: Iterable[str]) -> frozenset[str]:
    """D(a) for one call: ``{arg}`` placeholders filled, globs matched to known keys.

    Raises:
        IcoreError: a placeholder names an argument the call lacks, or an argument
            used in a key is not a string or number.
    """
    keys: set[str] = set()
    known_l = list(known)
    for pat in patterns:
        parts = []
        for lit, name, _spec, _conv in string.Formatter().parse(pat):
            parts.append(lit)
            if name:
                if name not in args:
                    raise IcoreError(f"D(a) entry {pat!r} needs argument {name!r}",
                                     key=pat, argument=name)
                val = args[name]
                if isinstance(val, bool) or not isinstance(val, str | int | float):
                    raise IcoreError(f"argument {name!r} used in {pat!r} must be a string "
                                     "or number", key=pat, argument=name)
                parts.append(str(val))
        key = "".join(parts)
        if any(c in key for c in "*?["):
            keys.update(k for k in known_l if fnmatch.fnmatchcase(k, key))
        else:
            keys.add(key)
    return frozenset(keys)


def _text_of(rec: Record, limit: int = 2000) -> str:
    c = rec.content
    if isinstance(c, dict) and "value" in c and set(c) <= {"value", "uri"}:
        import json
        s = json.dumps(c["value"], sort_keys=True)
    elif isinstance(c, dict) and isinstance(c.get("contents"), list):
        texts = []
        for part in c["contents"]:
            if isinstance(part, dict) and isinstance(part.get("text"), str):
                texts.append(part["text"])
            elif isinstance(part, dict) and "blob" in part:
                texts.append(f"<binary {part.get('mimeType') or ''}>")
        s = "\n".join(texts)
    else:
        s = str(c)
    return s if len(s) <= limit else s[:limit] + "...[cut]"


class FactBook:
    """The owners' stores, the executor replica and the gate of one gateway.

    Args:
        ownership: key (or glob) -> owner; plan records' keys are added.
        backend: ``"memory"`` or ``"sqlite"``.
        path: folder of the SQLite files (one per owner), for ``"sqlite"``.
        gate_timeout_s: bound of one owner query, seconds.

    Raises:
        GatewayError: (from the caller) never; store errors propagate as
            :class:`icore.errors.StoreError`.
    """

    def __init__(self, owners: Mapping[str, str], *, backend: str = "memory",
                 path: Path | None = None, gate_timeout_s: float = DEFAULT_TIMEOUT_S
                 ) -> None:
        mapping = {**owners, f"{PLAN_PREFIX}*": PLAN_OWNER}
        self.ownership = OwnershipMap.from_mapping(mapping)
        owner_ids = sorted(set(owners.values()))
        self.stores: dict[str, Store] = {}
        for o in owner_ids:
            if backend == "sqlite":
                assert path is not None
                path.mkdir(parents=True, exist_ok=True)
                self.stores[o] = SQLiteStore(path / f"{o}.db", self.ownership, o)
            else:
                self.stores[o] = MemoryStore(self.ownership, o)
        self.replica = MemoryStore(self.ownership)
        self.local = LocalOwners(self.stores)
        self.fence = Fence.for_store(self.replica, AsyncLocalOwners(self.local),
                                     timeout_s=gate_timeout_s)
        assert isinstance(self.fence.validator, GateValidator)
        self._ctx: GateContext = self.fence.validator.context
        self._points = self._ctx.points or PointCounter()
        self._plan_seq = itertools.count(1)
        self._lock = threading.Lock()
        # the replica holds every version committed, so lineage walks are complete
        for store in self.stores.values():
            for key in store.head_keys():
                self._install_chain(store, key)

    def _install_chain(self, store: Store, key: str) -> None:
        chain: list[Record] = []
        h = store.head(key)
        rid = None if h is None else h.record_id
        while rid is not None:
            rec = store.get(rid)
            if rec is None or self.replica.get(rid) is not None:
                break
            chain.append(rec)
            rid = next((p for p in rec.parents if (q := store.get(p)) is not None
                        and q.key == key), None)
        for rec in reversed(chain):
            self.replica.install(rec)

    # -- facts ------------------------------------------------------------------------
    def owner_of(self, key: str) -> str | None:
        """The owner of ``key`` (None: the key is not a fact and is not versioned)."""
        o = self.ownership.owner_of(key)
        return None if o == PLAN_OWNER and key.startswith(PLAN_PREFIX) else o

    def head(self, key: str) -> Record | None:
        """The owner's current version of ``key`` (None: no version yet or no owner)."""
        o = self.owner_of(key)
        store = self.stores.get(o) if o is not None else None
        if store is None:
            return None
        h = store.head(key)
        return None if h is None else store.get(h.record_id)

    def known_keys(self) -> list[str]:
        """Every key with a version, sorted."""
        return sorted({k for s in self.stores.values() for k in s.head_keys()})

    def observe(self, key: str, content: JSONValue, *, type: str = "resource"
                ) -> tuple[Record | None, bool]:
        """Make ``content`` the current version of ``key`` (a new record if it differs).

        Returns:
            ``(record, created)``: the current version (None when the key has no owner:
            not a fact) and whether a new version was committed.

        Raises:
            StoreError: the owner's store refused the commit (closed, conflict).
            MalformedRecord: ``content`` is not JSON or too large.
        """
        o = self.owner_of(key)
        if o is None or o not in self.stores:
            return None, False
        store = self.stores[o]
        with self._lock:
            h = store.head(key)
            cur = None if h is None else store.get(h.record_id)
            if cur is not None and cur.content == content:
                return cur, False
            rec = Record.create(key=key, owner=o, seq=store.next_seq(o), content=content,
                                parents=[] if cur is None else [cur.id], type=type)
            store.commit(rec, writer=o)
            self.replica.install(rec)
        return rec, True

    # -- the gate ---------------------------------------------------------------------
    async def gate(self, view: SessionView, tool: str, deps: Collection[str],
                   args: Mapping[str, Any]) -> Verdict:
        """Validate one protected call of ``view``'s session (planfence Alg. 1).

        The plan is an action record citing the versions the session last read of the
        keys of D(a) and binding ``tool`` with ``args``; the owners of D(a) are asked for
        their heads (only those owners), each query bounded by the gate timeout.

        Returns:
            :class:`Verdict`: authorized; replan_required (stale, first time: ``changed``
            holds the fresh records); blocked (second change, missing read, unreachable
            owner, malformed reply, bad arguments - fail closed).
        """
        dset = tuple(sorted(deps))
        replanned = tool in view.pending
        unread = [k for k in dset if k not in view.seen]
        inputs = [view.seen[k] for k in dset if k in view.seen]
        ptool = ProtectedTool(_never, depends_on=dset, name=tool)
        try:
            with self._lock:
                seq = next(self._plan_seq)
                plan = action_record(key=f"{PLAN_PREFIX}{view.sid}/{seq}", owner=PLAN_OWNER,
                                     seq=seq, action=tool, args=args, inputs=inputs)
                self.replica.install(plan)
        except IcoreError as exc:
            d = GateDecision(outcome=Outcome.BLOCKED, reason=Reason.ARGS_MISMATCH,
                             action=tool, roots=(), deps=dset, replanned=replanned,
                             detail=f"the call's arguments cannot be bound: {exc}")
            self.fence.log(d)
            return Verdict(d, None, dset, {})
        if unread:
            # the plan cites no version of these keys: Alg. 1 line 2 blocks
            # (missing_boundary); the session is shown the current versions
            d = await self.fence.acheck(ptool, roots=[plan.id], args=args,
                                        replanned=replanned)
            shown = {k: r for k in unread if (r := self.head(k)) is not None}
            return Verdict(d, plan, dset, shown)
        d = await self.fence.acheck(ptool, roots=[plan.id], args=args, replanned=replanned)
        changed: dict[str, Record] = {}
        if d.outcome is Outcome.REPLAN_REQUIRED:
            for k, rec in d.fresh.items():
                self.replica.install(rec)
                changed[k] = rec
        elif d.reason is Reason.SECOND_CHANGE:
            changed = {k: r for k in dset if (r := self.head(k)) is not None
                       and view.seen.get(k) is not None and view.seen[k].id != r.id}
        return Verdict(d, plan, dset, changed)

    def close(self) -> None:
        """Close the owners' stores (SQLite files flushed)."""
        for s in self.stores.values():
            s.close()
        self.replica.close()


def _never(**_: Any) -> None:  # the gateway forwards the call itself after the gate
    raise AssertionError("the gateway never runs a protected tool through the fence")


def describe(rec: Record) -> str:
    """One fact version for a model: ``uri (version n): value``."""
    return f"{rec.key} (version {rec.seq}): {_text_of(rec)}"
