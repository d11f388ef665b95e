"""Shared facts declared once with their owners (issue 28 item 1; planfence Sec. 3.1).

A :class:`Workspace` is the team's memory seen from one process: the ownership map of the
shared facts (semantic key -> owner), the stores of the owners hosted here (in memory or
SQLite, one per owner) and an owner access for the owners hosted elsewhere (the TCP owner
client or NATS owner access of :mod:`icore.net`). Writes are compare-and-set commits at
the owner (:meth:`Workspace.update` retries a lost race); reads go to the owner's head.
:meth:`Workspace.agent` hands out the per-agent handle that records what an agent read
and builds and validates the action records of its protected calls
(:class:`~icore.workspace.Agent`).
"""

from __future__ import annotations

import difflib
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from icore.errors import CommitConflict
from icore.memory import (
    DEFAULT_TIMEOUT_S,
    HeadReply,
    LocalOwners,
    MemoryStore,
    OwnerAccess,
    OwnershipMap,
    OwnerUnavailable,
    SQLiteStore,
    Store,
)
from icore.records import JSONValue, Record, RecordId
from icore.workspace._agent import Agent
from icore.workspace._errors import WorkspaceError

FACT_TYPE = "fact"
"""Record type of the versions :meth:`Workspace.put` / :meth:`Workspace.update` write."""

MAX_ANCESTORS = 10_000
"""Most ancestors one read installs into an agent's replica."""


def _fix(key: str) -> str:
    return f"declare it: Workspace({{{key!r}: '<owner>'}})"


_GLOB = frozenset("*?[")


def _is_pattern(key: str) -> bool:
    return any(c in _GLOB for c in key)


def suggest_key(key: str, om: OwnershipMap) -> str | None:
    """The declared key closest to a misspelled ``key`` (difflib), or None.

    A pattern ``day/*`` is compared through its literal prefix: ``dya/2026-12-10`` ->
    ``day/2026-12-10``.
    """
    cands: list[str] = []
    for pat in om.to_dict():
        if not _is_pattern(pat):
            cands.append(pat)
            continue
        prefix = pat[:min(pat.index(c) for c in _GLOB if c in pat)]
        if prefix.endswith("/") and "/" in key:
            head, rest = key.split("/", 1)
            head += "/"
        else:
            head, rest = key[:len(prefix)], key[len(prefix):]
        close = difflib.SequenceMatcher(None, head, prefix).ratio() >= 0.6
        if prefix and close and om.owner_of(prefix + rest) is not None:
            cands.append(prefix + rest)
    best = difflib.get_close_matches(key, cands, n=1, cutoff=0.6)
    return best[0] if best else None


class _Owners:
    """Owner access routed by owner: stores hosted here, else the remote access."""

    def __init__(self, local: Mapping[str, Store], remote: OwnerAccess | None) -> None:
        self.local = LocalOwners(local)
        self.remote = remote

    def query_heads(self, owner: str, keys: Sequence[str], *,
                    known: Mapping[str, RecordId] | None = None,
                    timeout_s: float = DEFAULT_TIMEOUT_S) -> HeadReply:
        """See :meth:`icore.memory.OwnerAccess.query_heads`."""
        if owner in self.local.stores or self.remote is None:
            return self.local.query_heads(owner, keys, known=known, timeout_s=timeout_s)
        return self.remote.query_heads(owner, keys, known=known, timeout_s=timeout_s)

    def fetch(self, owner: str, ids: Sequence[RecordId], *,
              timeout_s: float = DEFAULT_TIMEOUT_S) -> list[Record]:
        """See :meth:`icore.memory.OwnerAccess.fetch`."""
        if owner in self.local.stores or self.remote is None:
            return self.local.fetch(owner, ids, timeout_s=timeout_s)
        return self.remote.fetch(owner, ids, timeout_s=timeout_s)


class Workspace:
    """The shared facts of a team, their owners and how to reach them.

    Args:
        facts: semantic key (or glob pattern, ``"order/*"``) -> owner, or an
            :class:`~icore.memory.OwnershipMap`.
        stores: owner -> the store hosted in this process for that owner's keys. Owners
            without a store here are reached through ``remote``; with neither ``stores``
            nor ``remote`` every owner gets a :class:`~icore.memory.MemoryStore`.
        remote: owner access for owners hosted elsewhere (``SyncOwnerClient`` over TCP,
            NATS owner access, any :class:`~icore.memory.OwnerAccess`).
        timeout_s: per-owner RPC timeout of reads and gate queries, in seconds.
        closing: objects closed by :meth:`close` (a client this workspace opened).

    Raises:
        WorkspaceError: ``facts`` is empty or not a mapping of non-empty strings, or a
            store hosts another owner's keys.
    """

    def __init__(self, facts: Mapping[str, str] | OwnershipMap, *,
                 stores: Mapping[str, Store] | None = None,
                 remote: OwnerAccess | None = None, timeout_s: float = DEFAULT_TIMEOUT_S,
                 closing: Iterable[Any] = ()) -> None:
        if isinstance(facts, OwnershipMap):
            om = facts
        else:
            if isinstance(facts, str) or not isinstance(facts, Mapping) or not facts:
                raise WorkspaceError(
                    "facts must be a non-empty mapping of semantic key -> owner",
                    got=type(facts).__name__,
                    fix="Workspace({'order/42': 'sales'})")
            bad = [k for k, o in facts.items()
                   if not (isinstance(k, str) and k and isinstance(o, str) and o)]
            if bad:
                raise WorkspaceError("every fact needs a non-empty key and owner",
                                     keys=[repr(k) for k in bad])
            om = OwnershipMap.from_mapping(facts)
        self.ownership = om
        if stores is None and remote is None:
            stores = {o: MemoryStore(om, o) for o in sorted(om.owners())}
        self.stores: dict[str, Store] = dict(stores or {})
        for owner, st in self.stores.items():
            if st.agent is not None and st.agent != owner:
                raise WorkspaceError("a store hosts another owner's keys", owner=owner,
                                     store_agent=st.agent)
        self.remote = remote
        self.timeout_s = timeout_s
        self.owners = _Owners(self.stores, remote)
        self._agents: dict[str, Agent] = {}
        self._lock = threading.Lock()
        self._closing = list(closing)

    # -- construction helpers ---------------------------------------------------------
    @classmethod
    def in_memory(cls, facts: Mapping[str, str] | OwnershipMap) -> Workspace:
        """Every owner in this process with a :class:`~icore.memory.MemoryStore`."""
        return cls(facts)

    @classmethod
    def sqlite(cls, facts: Mapping[str, str] | OwnershipMap,
               directory: str | Path) -> Workspace:
        """Every owner in this process with its own SQLite file ``<directory>/<owner>.db``.

        Raises:
            WorkspaceError: as for the constructor.
        """
        probe = cls(facts, stores={}, remote=_NoOwners())
        folder = Path(directory)
        stores: dict[str, Store] = {
            o: SQLiteStore(folder / f"{o}.db", probe.ownership, o)
            for o in sorted(probe.ownership.owners())}
        return cls(probe.ownership, stores=stores, closing=stores.values())

    @classmethod
    def over_tcp(cls, facts: Mapping[str, str] | OwnershipMap, *, identity: str,
                 addresses: Mapping[str, tuple[str, int]], certs_dir: str | Path,
                 stores: Mapping[str, Store] | None = None,
                 timeout_s: float = DEFAULT_TIMEOUT_S) -> Workspace:
        """Owners in other processes reached over TCP with mutual TLS (``icore.net``).

        Args:
            facts: as for the constructor.
            identity: this process's agent id (its team certificate).
            addresses: owner -> ``(host, port)`` of its owner server.
            certs_dir: the team's certificate folder (``init_team_certs``).
            stores: the owners hosted in this process, if any.
            timeout_s: per-owner RPC timeout, in seconds.
        """
        from icore.net import SyncOwnerClient, client_context

        client = SyncOwnerClient(addresses, identity=identity,
                                 ssl_context=client_context(certs_dir, identity))
        return cls(facts, stores=stores or {}, remote=client, timeout_s=timeout_s,
                   closing=[client])

    def close(self) -> None:
        """Close what this workspace opened (SQLite files, a TCP client). Idempotent."""
        while self._closing:
            self._closing.pop().close()

    def __enter__(self) -> Workspace:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- facts --------------------------------------------------------------------------
    def owner_of(self, key: str) -> str:
        """o(key).

        Raises:
            WorkspaceError: no owner is declared for ``key`` (the message says how).
        """
        owner = self.ownership.owner_of(key) if isinstance(key, str) and key else None
        if owner is None:
            raise WorkspaceError("no owner is declared for this fact", key=key,
                                 fix=_fix(str(key)))
        return owner

    def check_keys(self, keys: Iterable[str], *, where: str) -> frozenset[str]:
        """The keys, each checked against the ownership map.

        Raises:
            WorkspaceError: ``keys`` is a str (one key must be in a set), not an iterable
                of non-empty strings, a key is a glob pattern (``day/*``: a call depends
                on facts, not patterns), or a key has no declared owner (the fix names
                the closest declared key when there is one).
        """
        if isinstance(keys, str | bytes):
            raise WorkspaceError(f"{where} must be a collection of keys, not a str",
                                 got=str(keys), fix=f"{where}={{{str(keys)!r}}}")
        try:
            out = frozenset(keys)
        except TypeError:
            raise WorkspaceError(f"{where} must be a collection of keys",
                                 got=type(keys).__name__) from None
        patterns = sorted(k for k in out if isinstance(k, str) and _is_pattern(k))
        if patterns:
            raise WorkspaceError(
                f"{where} names a pattern, not a fact: a call depends on the facts it "
                "acts on", keys=patterns,
                fix=f"name the fact from the call's arguments: depends_on=lambda a: "
                f"{{f'{patterns[0].split('*')[0]}{{a[...]}}'}}")
        unowned = sorted(k for k in out if not isinstance(k, str) or not k
                         or self.ownership.owner_of(k) is None)
        if unowned:
            first = str(unowned[0])
            near = suggest_key(first, self.ownership) if isinstance(unowned[0], str) else None
            fix = f"did you mean {near!r}?" if near else _fix(first)
            raise WorkspaceError(f"{where} names facts no owner is declared for",
                                 keys=[str(k) for k in unowned], fix=fix)
        if not out:
            raise WorkspaceError(f"{where} is empty", fix=f"{where}={{'<key>'}}")
        return out

    def _store_for_write(self, key: str, by: str | None) -> tuple[str, Store]:
        owner = self.owner_of(key)
        if by is not None and by != owner:
            raise WorkspaceError("only the fact's owner may write it", key=key, owner=owner,
                                 writer=by)
        store = self.stores.get(owner)
        if store is None:
            raise WorkspaceError("the fact's owner is hosted in another process; it "
                                 "writes the fact there", key=key, owner=owner)
        return owner, store

    def head(self, key: str) -> Record | None:
        """The owner's current version of ``key`` (None when it has none).

        Raises:
            WorkspaceError: no owner is declared for ``key``.
            OwnerUnavailable: the owner did not answer.
        """
        owner = self.owner_of(key)
        reply = self.owners.query_heads(owner, [key], timeout_s=self.timeout_s)
        entry = reply.heads.get(key)
        if entry is None:
            return None
        got = self.owners.fetch(owner, [entry.record_id], timeout_s=self.timeout_s)
        for r in got:
            if r.id == entry.record_id and r.has_content:
                return r.verify()
        raise OwnerUnavailable("the owner did not return its head record", owner=owner,
                               key=key)

    def value(self, key: str) -> JSONValue | None:
        """The content of :meth:`head` (None when the fact has no version)."""
        rec = self.head(key)
        return None if rec is None else rec.content

    def commit(self, key: str, value: JSONValue, *, expected: RecordId | None,
               by: str | None = None, inputs: Sequence[Record] = (),
               type: str = FACT_TYPE) -> Record:
        """One compare-and-set write: a new version of ``key`` replacing ``expected``.

        Args:
            key: the fact.
            value: its new JSON value.
            expected: the head this version replaces (None: the fact must not exist yet);
                recorded as the new record's ``supersedes`` link.
            by: the writing agent (checked to be the owner).
            inputs: records the value was derived from (its exact parents).
            type: the record type.

        Returns:
            The committed record.

        Raises:
            WorkspaceError: no owner declared, ``by`` is not the owner, or the owner is
                hosted elsewhere.
            HeadConflict: the head moved (retry with :meth:`update`).
            MalformedRecord: ``value`` is not JSON.
        """
        owner, store = self._store_for_write(key, by)
        # the version it replaces is the owner's chain link (``supersedes``), never an
        # input: one lineage rule (records/_lineage.py, #30)
        rec = Record.create(key=key, owner=owner, seq=store.next_seq(owner), content=value,
                            parents=[r.id for r in inputs], type=type, supersedes=expected)
        store.commit(rec, writer=owner, expected_head=expected)
        return rec

    def update(self, key: str, fn: Callable[[JSONValue | None], JSONValue], *,
               retries: int = 8, by: str | None = None, inputs: Sequence[Record] = (),
               type: str = FACT_TYPE) -> Record:
        """Read-modify-write ``key`` with compare-and-set, retrying a lost race.

        ``fn(current value or None)`` returns the new value; on a
        :class:`~icore.errors.CommitConflict` (another writer moved the head in between)
        the head is read again and ``fn`` called again, up to ``retries`` more times.

        Raises:
            CommitConflict: still conflicting after ``retries`` retries.
            WorkspaceError: as for :meth:`commit`, or ``retries`` is negative.
        """
        if not isinstance(retries, int) or retries < 0:
            raise WorkspaceError("retries must be an int >= 0", retries=retries)
        _, store = self._store_for_write(key, by)
        attempt = 0
        while True:
            entry = store.head(key)
            cur = store.get(entry.record_id) if entry is not None else None
            try:
                return self.commit(key, fn(None if cur is None else cur.content),
                                   expected=None if entry is None else entry.record_id,
                                   by=by, inputs=inputs, type=type)
            except CommitConflict:
                attempt += 1
                if attempt > retries:
                    raise

    def put(self, key: str, value: JSONValue, *, by: str | None = None,
            inputs: Sequence[Record] = (), type: str = FACT_TYPE) -> Record:
        """Write ``value`` as the fact's new version, whatever the head is (last writer wins).

        Use :meth:`update` when the new value depends on the current one.
        """
        return self.update(key, lambda _cur: value, by=by, inputs=inputs, type=type)

    # -- agents ---------------------------------------------------------------------------
    def agent(self, name: str) -> Agent:
        """The handle of agent ``name`` (created once; the same object afterwards).

        Raises:
            WorkspaceError: ``name`` is empty, not a str, or contains ``/``.
        """
        if not isinstance(name, str) or not name or "/" in name:
            raise WorkspaceError("an agent name is a non-empty str without '/'",
                                 agent=repr(name))
        with self._lock:
            got = self._agents.get(name)
            if got is None:
                got = self._agents[name] = Agent(self, name)
            return got


class _NoOwners:
    """A placeholder access that reaches nobody (only for :meth:`Workspace.sqlite`)."""

    def query_heads(self, owner: str, keys: Sequence[str], *,
                    known: Mapping[str, RecordId] | None = None,
                    timeout_s: float = DEFAULT_TIMEOUT_S) -> HeadReply:
        """Always raises :class:`~icore.memory.OwnerUnavailable`."""
        raise OwnerUnavailable("no owner", owner=owner)

    def fetch(self, owner: str, ids: Sequence[RecordId], *,
              timeout_s: float = DEFAULT_TIMEOUT_S) -> list[Record]:
        """Always raises :class:`~icore.memory.OwnerUnavailable`."""
        raise OwnerUnavailable("no owner", owner=owner)
