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

import dataclasses
import inspect
import json
import math
import os
import threading
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from icore.errors import CommitConflict, HeadConflict, MalformedRecord
from icore.memory import (
    DEFAULT_TIMEOUT_S,
    MemoryStore,
    OwnerAccess,
    OwnershipMap,
    OwnerUnavailable,
    SQLiteStore,
    Store,
)
from icore.records import (
    MAX_KEY_LEN,
    JSONValue,
    Record,
    RecordId,
    canonical_json,
    is_record_id,
)
from icore.workspace._agent import Agent
from icore.workspace._errors import WorkspaceError
from icore.workspace._folder_map import FolderOwnership, refuse_a_file
from icore.workspace._keychecks import KeyChecks
from icore.workspace._keys import (
    MISSING,
    _Missing,
    ambiguous_patterns,
    check_owner_names,
    detached,
    suggest_key,
    unstorable,
)
from icore.workspace._owners import NoOwners, Owners
from icore.workspace._remote_writes import RemoteWrites, new_version, not_writable

FACT_TYPE = "fact"
"""Record type of the versions :meth:`Workspace.put` / :meth:`Workspace.update` write."""

MAX_ANCESTORS = 10_000
"""Most ancestors one read installs into an agent's replica."""


__all__ = ["FACT_TYPE", "MISSING", "Workspace", "suggest_key"]


def _check_parts(stores: Any, remote: Any, timeout_s: Any, closing: Any) -> None:
    """The constructor's other arguments are of their types.

    Issue 29: an int store, a list of stores or an int ``closing`` raised AttributeError
    or TypeError, and a timeout of -1, NaN, True or ``"3"`` was kept.

    Raises:
        WorkspaceError: naming the argument, what it got and what it takes.
    """
    if stores is not None:
        if not isinstance(stores, Mapping):
            raise WorkspaceError("stores must be a mapping of owner name -> Store",
                                 got=type(stores).__name__,
                                 fix="stores={'sales': MemoryStore(ownership, 'sales')}")
        bad = {o: type(st).__name__ for o, st in stores.items()
               if not isinstance(o, str) or not isinstance(st, Store)}
        if bad:
            raise WorkspaceError("stores must map owner names (str) to icore.memory "
                                 "Store objects", stores=bad)
    if remote is not None and not isinstance(remote, OwnerAccess):
        raise WorkspaceError("remote must be an icore.memory.OwnerAccess (query_heads and "
                             "fetch)", got=type(remote).__name__)
    if isinstance(timeout_s, bool) or not isinstance(timeout_s, (int, float)) or \
            not math.isfinite(timeout_s) or timeout_s <= 0:
        raise WorkspaceError(f"timeout_s must be a finite number of seconds > 0, not "
                             f"{type(timeout_s).__name__} {timeout_s!r}"[:160])
    if isinstance(closing, (str, bytes)) or not isinstance(closing, Iterable):
        raise WorkspaceError("closing must be an iterable of objects to close",
                             got=type(closing).__name__)


class Workspace(KeyChecks):
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

    Ownership: an exact key wins over patterns; among patterns the longer (more
    specific) one wins. Two patterns of different owners of the same length that some
    key matches both of (``room/*1`` and ``room/R*``) are refused: the owner of
    ``room/R1`` would depend on declaration order.

    Raises:
        WorkspaceError: ``facts`` is empty or not a mapping of non-empty strings, an
            owner's name is not 1-63 characters of ``[A-Za-z0-9._-]`` not starting with
            ``.`` or ``-`` (one rule for every store: a SQLite owner's name is its file's),
            two owner patterns tie for some key, or a store hosts another owner's keys;
            ``stores`` not a mapping of owner name -> :class:`~icore.memory.Store`,
            ``remote`` no :class:`~icore.memory.OwnerAccess`, ``timeout_s`` not a finite
            number > 0 (a bool or a string is refused), ``closing`` not iterable.
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
            bad_keys = [k for k in facts if not (isinstance(k, str) and k) or unstorable(k)]
            if bad_keys:  # a NUL or a lone surrogate: no store can hold the key (#29)
                raise WorkspaceError("every fact key must be a non-empty str with a UTF-8 "
                                     "form and no NUL",
                                     keys=[repr(k) for k in bad_keys],
                                     fix="Workspace({'order/42': 'sales'})")
            bad = {k: o for k, o in facts.items() if not (isinstance(o, str) and o)}
            if bad:
                k, o = next(iter(bad.items()))
                raise WorkspaceError(
                    "an owner must be a non-empty str (the owning agent's name), not "
                    f"{type(o).__name__} {o!r}", keys=[repr(k) for k in bad],
                    fix=f"Workspace({{{k!r}: 'dispatcher'}}): key -> the name of the agent "
                    "that writes it")
            om = OwnershipMap.from_mapping(facts)
        check_owner_names(om)  # one rule for every store (SQLite names files by it)
        tie = ambiguous_patterns(om)
        if tie:
            a, b = tie[0]
            raise WorkspaceError(
                "two owner patterns of different owners both match some keys and neither "
                "is more specific: the owner would depend on declaration order",
                patterns=[a, b], owners=[om.to_dict()[a], om.to_dict()[b]],
                fix="make one of them more specific (longer), or declare the shared "
                "keys exactly")
        self.ownership = om
        if stores is None and remote is None:
            stores = {o: MemoryStore(om, o) for o in sorted(om.owners())}
        _check_parts(stores, remote, timeout_s, closing)
        self.stores: dict[str, Store] = dict(stores or {})
        for owner, st in self.stores.items():
            if st.agent is not None and st.agent != owner:
                raise WorkspaceError("a store hosts another owner's keys", owner=owner,
                                     store_agent=st.agent)
        self.remote = remote
        self.timeout_s = timeout_s
        self.owners = Owners(self.stores, remote, om)
        self._agents: dict[str, Agent] = {}
        self._lock = threading.Lock()
        self._closing = list(closing)
        self.remote_writes: RemoteWrites | None = None

    # -- construction helpers ---------------------------------------------------------
    @classmethod
    def in_memory(cls, facts: Mapping[str, str] | OwnershipMap) -> Workspace:
        """Every owner in this process with a :class:`~icore.memory.MemoryStore`."""
        return cls(facts)

    @classmethod
    def sqlite(cls, facts: Mapping[str, str] | OwnershipMap,
               directory: str | Path) -> Workspace:
        """Every owner in this process with its own SQLite file ``<directory>/<owner>.db``.

        The folder (and its missing parents) is created when it does not exist.

        Raises:
            WorkspaceError: as for the constructor (which refuses an owner name that is
                not a safe file name, :data:`~icore.workspace._keys.OWNER_NAME`, for every
                store: ``../x`` or ``a/b`` would put its database outside the folder);
                ``directory`` is neither a str nor a path (e.g. None) or is empty, or it
                (or a folder above it) is a file, not a folder (``directory``); the
                folder was opened with a map naming another owner for one of ``facts``'
                keys or patterns (its record ``ownership.sqlite``, docs/workspace.md
                "One folder, one map"; keys only an overlap reaches are refused at
                their first use).
        """
        if not isinstance(directory, str | os.PathLike) or not str(directory):
            raise WorkspaceError(
                "Workspace.sqlite needs the folder of the owners' SQLite files (a str or "
                "a path)", argument="directory", got=repr(directory)[:80],
                fix="Workspace.sqlite(facts, 'data/owners')")
        probe = cls(facts, stores={}, remote=NoOwners())
        folder = Path(directory)
        refuse_a_file(folder)
        record = FolderOwnership(folder, probe.ownership)  # before any owner file (#28)
        stores = _sqlite_stores(folder, probe.ownership, record)
        ws = cls(probe.ownership, stores=stores, closing=[record, *stores.values()])
        ws.folder_record = record
        return ws

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

        The facts of the owner ``identity`` names, when no store of it is hosted here,
        are written at its owner service (``icore serve``) over this connection (#28):
        the service applies every owner rule; other owners' facts stay refused.
        """
        from icore.net import SyncOwnerClient, client_context

        client = SyncOwnerClient(addresses, identity=identity,
                                 ssl_context=client_context(certs_dir, identity))
        ws = cls(facts, stores=stores or {}, remote=client, timeout_s=timeout_s,
                 closing=[client])
        ws.remote_writes = RemoteWrites(client, identity, timeout_s, ws.ownership)
        return ws

    def close(self) -> None:
        """Close what this workspace opened (SQLite files, a TCP client). Idempotent."""
        while self._closing:
            self._closing.pop().close()

    def __enter__(self) -> Workspace:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- facts (owner_of, check_keys, check_written, not_written: KeyChecks) ------------
    def _store_for_write(self, key: str, by: str | None
                         ) -> tuple[str, Store | RemoteWrites]:
        owner = self.owner_of(key)
        if by is not None and not isinstance(by, str):
            raise WorkspaceError("by= names the writing agent (a str)", key=key,
                                 got=repr(by)[:80])
        if by is not None and by != owner:
            raise WorkspaceError("only the fact's owner may write it (by= names another "
                                 "agent)", key=key, owner=owner, writer=by)
        store = self.stores.get(owner)
        if store is None:
            rw = self.remote_writes
            if rw is not None and rw.identity == owner:
                return owner, rw  # committed at its owner service, by its identity (#28)
            raise not_writable(key, owner, rw)
        return owner, store

    def head(self, key: str) -> Record | None:
        """The owner's current version of ``key``; None when it has never been written.

        The record's content is a copy: changing it changes nothing stored.

        Raises:
            WorkspaceError: ``key`` is not a fact key or no owner is declared for it.
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
                r.verify()
                return dataclasses.replace(r, content=detached(r.content))
        raise OwnerUnavailable("the owner did not return its head record", owner=owner,
                               key=key)

    def value(self, key: str, default: JSONValue | _Missing = MISSING) -> JSONValue:
        """The content of :meth:`head` (a copy: changing it changes nothing stored).

        A fact written as ``None`` reads as ``None``; a fact never written raises unless
        ``default`` is given (then ``default`` is returned).

        Raises:
            FactNotWritten: the fact has no version and no ``default`` was given (the fix
                names a written key close to ``key``, a likely typo).
            WorkspaceError: as for :meth:`owner_of`.
            OwnerUnavailable: the owner did not answer.
        """
        rec = self.head(key)
        if rec is None:
            if isinstance(default, _Missing):
                raise self.not_written(key)
            return default
        return rec.content

    def commit(self, key: str, value: JSONValue, *, expected: RecordId | None,
               by: str | None = None, inputs: Sequence[Record] = (),
               type: str = FACT_TYPE) -> Record:
        """One compare-and-set write: a new version of ``key`` replacing ``expected``.

        Args:
            key: the fact.
            value: its new JSON value (copied: changing ``value`` afterwards changes
                nothing stored).
            expected: the id of the head this version replaces (``ws.head(key).id``;
                None: the fact must not exist yet).
            by: the writing agent (checked to be the owner).
            inputs: records the value was derived from (its exact parents).
            type: the record type.

        Returns:
            The committed record.

        Raises:
            WorkspaceError: ``key`` is not a fact key, no owner is declared, ``by`` is not
                the owner, the owner is hosted elsewhere and this process does not hold
                its identity (``over_tcp(identity=)``), ``expected`` is neither None
                nor a record id, ``inputs`` is not a sequence of records or ``type`` not
                a non-empty str.
            HeadConflict: the head is not ``expected`` (another writer moved it, or wrote
                this very version first): retry with :meth:`update`.
            MalformedRecord: ``value`` is not JSON.
        """
        owner, store = self._store_for_write(key, by)
        _check_inputs(key, inputs, type)
        if expected is not None and not is_record_id(expected):
            raise WorkspaceError(
                "expected= is the id of the head this version replaces", key=key,
                got=repr(expected)[:80],
                fix=f"expected=ws.head({key!r}).id, or None for a fact not written yet")
        if isinstance(store, RemoteWrites):  # this identity's owner service (#28)
            return store.commit_value(key, value, expected=expected, inputs=inputs,
                                      type=type)
        rec = new_version(key, owner, store.next_seq(owner), value, inputs=inputs,
                          type=type, expected=expected)
        if not store.commit(rec, writer=owner, expected_head=expected).created:
            # another writer committed this very version (same base, value and owner
            # sequence) first: that write was its, and this one would be lost
            cur = store.head(key)
            raise HeadConflict("another writer wrote this version first", key=key,
                               expected=expected,
                               current=None if cur is None else cur.record_id)
        return rec

    def update(self, key: str, fn: Callable[[Any], JSONValue], *,
               retries: int = 8, by: str | None = None, inputs: Sequence[Record] = (),
               type: str = FACT_TYPE, default: JSONValue | _Missing = MISSING) -> Record:
        """Read-modify-write ``key`` with compare-and-set, retrying a lost race.

        ``fn(current value)`` returns the new value (it gets a copy: changing it in place
        changes nothing until it is returned). On a :class:`~icore.errors.CommitConflict`
        (another writer moved the head in between) the head is read again and ``fn``
        called again, up to ``retries`` more times. A fact never written gets
        ``fn(default)`` when ``default`` is given; without it the first value is written
        with :meth:`put`.

        Raises:
            FactNotWritten: the fact has no version yet and no ``default`` was given.
            CommitConflict: still conflicting after ``retries`` retries.
            WorkspaceError: as for :meth:`commit`; ``fn`` is not callable (to write a
                value use :meth:`put`) or cannot take the one argument (the old value;
                named with the fix); ``fn`` returned None (write ``None`` with
                :meth:`put`); ``retries`` is negative.
        """
        if not callable(fn):
            raise WorkspaceError("update needs a function old value -> new value",
                                 key=key, got=_type_name(fn),
                                 fix=f"ws.update({key!r}, lambda old: {{**old, ...}}); "
                                 f"to replace the value: ws.put({key!r}, value)")
        _check_arity(key, fn)
        return self._write(key, fn, retries=retries, by=by, inputs=inputs, type=type,
                           default=default, check_none=True)

    def _write(self, key: str, fn: Callable[[Any], JSONValue], *, retries: int,
               by: str | None, inputs: Sequence[Record], type: str,
               default: JSONValue | _Missing, check_none: bool,
               keep_same: bool = False) -> Record:
        if not isinstance(retries, int) or isinstance(retries, bool) or retries < 0:
            raise WorkspaceError("retries must be an int >= 0", retries=retries)
        _, store = self._store_for_write(key, by)
        _check_inputs(key, inputs, type)
        attempt = 0
        while True:
            entry = store.head(key)
            cur = store.get(entry.record_id) if entry is not None else None
            if cur is None:
                if isinstance(default, _Missing):
                    raise self.not_written(key, updating=check_none)
                old: JSONValue = detached(default)
            else:
                old = detached(cur.content)
            new = fn(old)
            if new is None and check_none:
                raise WorkspaceError(
                    "the update function returned None (did it change the value in place "
                    "without returning it?)", key=key,
                    fix=f"return the new value: lambda old: {{**old, ...}}; to store None "
                    f"use ws.put({key!r}, None)")
            if keep_same and cur is not None and _same(cur, new, type, inputs):
                return cur  # nothing changed: no new version, no plan goes stale
            try:
                return self.commit(key, new,
                                   expected=None if entry is None else entry.record_id,
                                   by=by, inputs=inputs, type=type)
            except CommitConflict:
                attempt += 1
                if attempt > retries:
                    raise

    def put(self, key: str, value: JSONValue, *, by: str | None = None,
            inputs: Sequence[Record] = (), type: str = FACT_TYPE) -> Record:
        """Write ``value`` as the fact's new version, whatever the head is (last writer wins).

        ``value`` is copied. ``None`` is a value like any other (it reads back as None).
        Use :meth:`update` when the new value depends on the current one.

        A value equal to the head's (the same canonical JSON: ``1`` and ``1.0`` or
        ``true`` differ) of the same ``type``, with no ``inputs`` or the head's own, is a
        no-op returning the head: no new version, so no plan derived from the head goes
        stale (a periodic sync re-putting unchanged values never blocks an agent; the
        MCP gateway treats re-read content the same way). To force a new version anyway,
        :meth:`commit` with ``expected=ws.head(key).id``.

        Returns:
            The new version, or the head when nothing changed.

        Raises:
            WorkspaceError, MalformedRecord: as for :meth:`commit`.
        """
        return self._write(key, lambda _cur: value, retries=8, by=by, inputs=inputs,
                           type=type, default=None, check_none=False, keep_same=True)

    # -- agents ---------------------------------------------------------------------------
    def agent(self, name: str, *, scope: Callable[[], Hashable | None] | None = None
              ) -> Agent:
        """The handle of agent ``name`` (created once; the same object afterwards).

        Args:
            name: the agent id.
            scope: the application's run scope, a function returning the conversation
                code runs in now (e.g. a request's session id from a contextvar; None
                when it cannot tell). Reads and calls are kept per scope: a call derives
                only from reads of its own scope. Default: what an integration detects
                (the Agents SDK run's trace, the LangGraph thread), or
                ``with agent.scope(id):``.

        Raises:
            WorkspaceError: ``name`` is empty, not a str, longer than 512 characters,
                or contains ``/``, a NUL or a lone surrogate; ``scope`` is not callable,
                or the handle exists with another ``scope`` function.
        """
        if scope is not None and not callable(scope):
            raise WorkspaceError("scope= is a function returning the current conversation "
                                 "id", agent=ascii(name)[:80], got=type(scope).__name__,
                                 fix="ws.agent('desk', scope=lambda: session_id.get())")
        if not isinstance(name, str) or not name or "/" in name or \
                len(name) > MAX_KEY_LEN or unstorable(name):
            raise WorkspaceError(f"an agent name is a non-empty str of at most {MAX_KEY_LEN} "
                                 "characters without '/', a NUL or a lone surrogate",
                                 agent=ascii(name)[:80])
        with self._lock:
            got = self._agents.get(name)
            if got is None:
                got = self._agents[name] = Agent(self, name)
            if scope is not None:
                if got.scope_source is not None and got.scope_source != scope:
                    raise WorkspaceError("the agent has another scope function already",
                                         agent=name, fix="pass the same function, or "
                                         "none after the first ws.agent(name, scope=f)")
                got.scope_source = scope
            return got


def _sqlite_stores(folder: Path, om: OwnershipMap, record: FolderOwnership
                   ) -> dict[str, Store]:
    """A store ``<folder>/<owner>.db`` per owner of ``om``.

    On a failure the ones opened and the folder's lock (``record``) are closed before
    the error goes on.
    """
    stores: dict[str, Store] = {}
    try:
        for o in sorted(om.owners()):
            stores[o] = SQLiteStore(folder / f"{o}.db", om, o)
    except BaseException:
        for st in stores.values():
            st.close()
        record.close()
        raise
    return stores


def _check_inputs(key: str, inputs: Any, type: Any) -> None:
    """Refuse ``inputs`` that are no sequence of records, a ``type`` that is no name.

    Raises:
        WorkspaceError: naming ``inputs`` or ``type`` and what was given.
    """
    if isinstance(inputs, str | bytes) or not isinstance(inputs, Sequence | set | frozenset) \
            or not all(isinstance(r, Record) for r in inputs):
        raise WorkspaceError("inputs are the records the value was derived from (a list of "
                             "Record, e.g. [ws.head('order/1')])", key=key,
                             got=_type_name(inputs))
    if not isinstance(type, str) or not type:
        raise WorkspaceError("type is the record type, a non-empty str", key=key,
                             got=repr(type)[:80])


def _same(cur: Record, value: JSONValue, type: str, inputs: Sequence[Record]) -> bool:
    """Whether writing ``value`` would repeat the head ``cur`` (see :meth:`Workspace.put`).

    A value with no JSON form, or one JSON would change (``{1: "a"}``: its key becomes
    ``"1"``), is no repeat: :meth:`Workspace.commit` checks it and names its field.
    """
    if cur.type != type or (inputs and sorted(r.id for r in inputs) != sorted(cur.parents)):
        return False
    try:
        text = canonical_json(value)
    except MalformedRecord:
        return False
    return text == canonical_json(cur.content) and json.loads(text) == value


def _type_name(value: object) -> str:
    """``value``'s type name (for an error's ``got``)."""
    return type(value).__name__


def _check_arity(key: str, fn: Callable[..., Any]) -> None:
    """``fn`` must take the old value as its one positional argument.

    Raises:
        WorkspaceError: its signature cannot bind one argument (e.g. ``lambda: ...``).
    """
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):  # a builtin without a signature: let it run
        return
    try:
        sig.bind(None)
    except TypeError as exc:
        name = getattr(fn, "__qualname__", type(fn).__name__)
        raise WorkspaceError("update's function must take the old value as its one "
                             "argument", key=key, function=name, error=str(exc),
                             fix=f"ws.update({key!r}, lambda old: {{**old, ...}})") from None
