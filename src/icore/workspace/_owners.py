"""Owner access of a workspace: the stores hosted here, else the remote access."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from icore.errors import RemoteError
from icore.memory import (
    DEFAULT_TIMEOUT_S,
    HeadReply,
    LocalOwners,
    OwnerAccess,
    OwnershipMap,
    OwnerUnavailable,
    Store,
)
from icore.records import Record, RecordId
from icore.workspace._remote_writes import map_disagreement


class Owners:
    """Owner access routed by owner: stores hosted here, else the remote access."""

    def __init__(self, local: Mapping[str, Store], remote: OwnerAccess | None,
                 ownership: OwnershipMap | None = None) -> None:
        self.local = LocalOwners(local)
        self.remote = remote
        self.ownership = ownership

    def query_heads(self, owner: str, keys: Sequence[str], *,
                    known: Mapping[str, RecordId] | None = None,
                    timeout_s: float = DEFAULT_TIMEOUT_S) -> HeadReply:
        """See :meth:`icore.memory.OwnerAccess.query_heads`.

        Raises:
            WorkspaceError: the remote owner service's map gives a key another owner
                than this process's map (``map_disagreement``, #28).
        """
        if owner in self.local.stores or self.remote is None:
            return self.local.query_heads(owner, keys, known=known, timeout_s=timeout_s)
        try:
            return self.remote.query_heads(owner, keys, known=known, timeout_s=timeout_s)
        except RemoteError as exc:
            raise map_disagreement(exc, self.ownership, owner) or exc from None

    def fetch(self, owner: str, ids: Sequence[RecordId], *,
              timeout_s: float = DEFAULT_TIMEOUT_S) -> list[Record]:
        """See :meth:`icore.memory.OwnerAccess.fetch`."""
        if owner in self.local.stores or self.remote is None:
            return self.local.fetch(owner, ids, timeout_s=timeout_s)
        return self.remote.fetch(owner, ids, timeout_s=timeout_s)


class NoOwners:
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
