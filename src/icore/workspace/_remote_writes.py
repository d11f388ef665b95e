"""A fact's new version, built here and committed at its owner, local or remote (#28).

:func:`new_version` builds the record :meth:`Workspace.commit` writes (the value checked
and named as the caller passed it). :class:`RemoteWrites` commits the facts of the owner
whose identity this process holds to that owner's service over the authenticated
connection (``Workspace.over_tcp(..., identity=owner)`` next to ``icore serve``): the
owner service applies every owner rule (writer = the certificate's identity = the key's
declared owner, compare-and-set base, increasing owner sequence), exactly as for a
commit made in its own process. The owner sequence is the service's: a commit with a
sequence the service has passed is refused with the service's last sequence, and sent
again with the next one.

:func:`map_disagreement` turns an owner service's refusal of a key its own map (the
team manifest) gives another owner into a :class:`WorkspaceError` naming both owners:
before, a client whose map routed ``campaign/*`` to ``mkt`` while the service's map gave
it to ``sales`` read "never written" for every such fact.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from icore.errors import ErrorCode, HeadConflict, MalformedRecord, RemoteError
from icore.memory import DEFAULT_TIMEOUT_S, HeadEntry, OwnershipMap
from icore.records import JSONValue, Record, RecordId
from icore.workspace._errors import WorkspaceError
from icore.workspace._keys import detached

SEQUENCE_RETRIES = 16
"""Commits sent again after the owner service named a larger owner sequence."""
_SEQUENCE_CODES = {ErrorCode.SEQUENCE.value, ErrorCode.SEQUENCE_CONFLICT.value}


def new_version(key: str, owner: str, seq: int, value: JSONValue, *,
                inputs: Sequence[Record], type: str, expected: RecordId | None) -> Record:
    """The record of ``value`` as ``key``'s next version, citing ``inputs``.

    The version it replaces (``expected``) is the owner's chain link (``supersedes``),
    never an input: one lineage rule (records/_lineage.py, #30). The content is a copy.

    Raises:
        MalformedRecord: ``value`` is no JSON value or too large (field ``value``).
    """
    try:  # validates value (depth, JSON)
        rec = Record.create(key=key, owner=owner, seq=seq, content=value,
                            parents=[r.id for r in inputs], type=type,
                            supersedes=expected)
    except MalformedRecord as exc:  # named as the caller passed it: the value
        if exc.fields.get("field") != "content":
            raise
        if "size" in exc.fields:  # a JSON value, too large to record
            raise MalformedRecord(f"the value is {exc.message}", key=key, field="value",
                                  size=exc.fields["size"],
                                  limit=exc.fields["limit"]) from None
        raise MalformedRecord(f"the value is no JSON value: {exc.message}", key=key,
                              field="value") from None
    return dataclasses.replace(rec, content=detached(value))  # the caller keeps its own


def not_writable(key: str, owner: str, writes: RemoteWrites | None) -> WorkspaceError:
    """The refusal of a write of ``owner``'s ``key`` by a process not holding its identity."""
    return WorkspaceError(
        "the fact's owner is hosted in another process: only a process holding the "
        "owner's identity writes it", key=key, owner=owner,
        identity=None if writes is None else writes.identity,
        fix=f"write it from a process with Workspace.over_tcp(..., identity={owner!r}) "
        f"(the owner's certificate), or host {owner!r}'s store in that process "
        "(docs/workspace.md \"Owners in other processes\")")


def map_disagreement(exc: RemoteError, ownership: OwnershipMap | None, asked: str
                     ) -> WorkspaceError | None:
    """The refusal of owner service ``asked`` as a map disagreement, or None.

    None unless the service refused on ownership (``remote_code`` ``ownership``) naming
    the key and its own owner of it (``service_owner``, ``""`` when its map declares
    none) and that owner differs from the one ``ownership`` (this process's map) names.

    Returns:
        A :class:`WorkspaceError` with fields ``key``, ``pattern`` (this map's entry that
        routes it), ``owner`` (this map's owner), ``service`` (the owner service asked),
        ``service_pattern`` and ``service_owner`` (the service's entry and owner),
        ``fix``.
    """
    f = exc.fields
    key, theirs = f.get("key"), f.get("service_owner")
    if f.get("remote_code") != ErrorCode.OWNERSHIP.value or not isinstance(key, str) \
            or not isinstance(theirs, str):
        return None
    mine = ownership.owner_of(key) if ownership is not None else asked
    if mine == theirs:
        return None
    pattern = ownership.entry_of(key) if ownership is not None else None
    return WorkspaceError(
        "this process's ownership map and the owner service's map (its team manifest) "
        "name different owners for a fact: reads here would find nothing and writes "
        "would be refused", key=key, pattern=pattern, owner=mine, service=asked,
        service_pattern=f.get("service_pattern") or None, service_owner=theirs or None,
        fix=f"give Workspace.over_tcp the map of the team manifest the services run "
        f"with (TeamManifest.ownership_map()): it routes {key!r} to "
        f"{theirs or 'no owner'!r}, this process's map to {mine!r}")


class RemoteWrites:
    """Commits of one owner's facts at its owner service, by a process holding its identity.

    Args:
        client: the TCP owner client (:class:`~icore.net.SyncOwnerClient`), connected
            with ``identity``'s certificate.
        identity: the owner whose facts this process may write.
        timeout_s: per-RPC timeout, in seconds.
        ownership: this process's map (names both owners when the service's map
            disagrees: :func:`map_disagreement`).
    """

    def __init__(self, client: Any, identity: str, timeout_s: float = DEFAULT_TIMEOUT_S,
                 ownership: OwnershipMap | None = None) -> None:
        self.client = client
        self.identity = identity
        self.timeout_s = timeout_s
        self.ownership = ownership
        self._last_seq = 0

    def head(self, key: str) -> HeadEntry | None:
        """The owner service's head of ``key`` (None: never written).

        Raises:
            WorkspaceError: the service's map gives ``key`` another owner
                (:func:`map_disagreement`).
        """
        try:
            reply = self.client.query_heads(self.identity, [key], timeout_s=self.timeout_s)
        except RemoteError as exc:
            raise map_disagreement(exc, self.ownership, self.identity) or exc from None
        got: HeadEntry | None = reply.heads.get(key)
        if got is not None and got.seq > self._last_seq:  # the owner's sequence is at
            self._last_seq = got.seq  # least this: the next commit skips a resend
        return got

    def get(self, rid: RecordId) -> Record | None:
        """The record ``rid`` from the owner service, verified (None: it has no content)."""
        for r in self.client.fetch(self.identity, [rid], timeout_s=self.timeout_s):
            if r.id == rid and r.has_content:
                r.verify()
                return r  # type: ignore[no-any-return]
        return None

    def commit_value(self, key: str, value: JSONValue, *, expected: RecordId | None,
                     inputs: Sequence[Record], type: str) -> Record:
        """Commit ``value`` as ``key``'s version replacing ``expected``; the record.

        Raises:
            HeadConflict: the head is not ``expected``, or another writer committed this
                very version first.
            RemoteError: the owner service refused (``remote_code``), or kept naming a
                larger owner sequence :data:`SEQUENCE_RETRIES` times.
            WorkspaceError: the service's map gives ``key`` another owner
                (:func:`map_disagreement`).
            MalformedRecord: as :func:`new_version`.
            TransportError: the owner service did not answer.
        """
        for attempt in range(SEQUENCE_RETRIES + 1):
            rec = new_version(key, self.identity, self._last_seq + 1, value,
                              inputs=inputs, type=type, expected=expected)
            try:
                ack = self.client.commit(self.identity, rec, expected_head=expected,
                                         timeout_s=self.timeout_s)
            except RemoteError as exc:
                mismatch = map_disagreement(exc, self.ownership, self.identity)
                if mismatch is not None:
                    raise mismatch from None
                last = exc.fields.get("last_seq")
                if exc.fields.get("remote_code") in _SEQUENCE_CODES and \
                        isinstance(last, int) and attempt < SEQUENCE_RETRIES:
                    # another writer of this owner moved it on
                    self._last_seq = max(self._last_seq, last)
                    continue
                raise
            self._last_seq = max(self._last_seq, ack.seq)
            if not ack.created:
                cur = self.head(key)
                raise HeadConflict("another writer wrote this version first", key=key,
                                   expected=expected,
                                   current=None if cur is None else cur.record_id)
            return rec
        raise AssertionError("unreachable")  # pragma: no cover
