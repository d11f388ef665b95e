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
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from icore.errors import ErrorCode, HeadConflict, MalformedRecord, RemoteError
from icore.memory import DEFAULT_TIMEOUT_S, HeadEntry
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


class RemoteWrites:
    """Commits of one owner's facts at its owner service, by a process holding its identity.

    Args:
        client: the TCP owner client (:class:`~icore.net.SyncOwnerClient`), connected
            with ``identity``'s certificate.
        identity: the owner whose facts this process may write.
        timeout_s: per-RPC timeout, in seconds.
    """

    def __init__(self, client: Any, identity: str, timeout_s: float = DEFAULT_TIMEOUT_S
                 ) -> None:
        self.client = client
        self.identity = identity
        self.timeout_s = timeout_s
        self._last_seq = 0

    def head(self, key: str) -> HeadEntry | None:
        """The owner service's head of ``key`` (None: never written)."""
        reply = self.client.query_heads(self.identity, [key], timeout_s=self.timeout_s)
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
