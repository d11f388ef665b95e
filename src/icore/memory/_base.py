"""Store interface, head entries and the owner rules shared by every backend.

Owner rules (planfence App. A, design.md 3.1): a record becomes a head only when the writer
is the key's declared owner, the owner sequence increases, and the head it replaces is the
key's current head (compare-and-set on the base, :func:`check_commit_rules`); the same
owner sequence with another record id is a conflict; re-committing an identical record is
a no-op. The checks and the head write happen in one critical section
(:meth:`Store._critical`: a per-store lock, plus one ``BEGIN IMMEDIATE`` transaction in
SQLite), so concurrent writers - threads or processes - never both win. A record whose
parents are not available is accepted only as *lineage incomplete*
(:meth:`Store.is_complete` is False) and :meth:`Store.lookup` does not return it, so it
can never lie on the path that authorizes an action.
"""

from __future__ import annotations

import abc
import contextlib
import enum
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import ClassVar, Final, TypeAlias

from icore._frozen import positional
from icore.errors import (
    HeadConflict,
    IcoreError,
    MalformedRecord,
    OwnershipError,
    SequenceConflict,
    SequenceError,
    StoreClosed,
)
from icore.memory._arg_checks import need_record, need_str, need_strs
from icore.memory._ownership import OwnershipMap
from icore.records import Record, RecordId, is_record_id, lineage_inputs


class _FromParents(enum.Enum):
    FROM_PARENTS = "from_parents"

    def __repr__(self) -> str:
        return "FROM_PARENTS"


FROM_PARENTS: Final = _FromParents.FROM_PARENTS
"""Default ``expected_head`` of :meth:`Store.commit`: the head a record replaces is the
version of its key among its exact parents (none: a creation)."""

ExpectedHead: TypeAlias = RecordId | _FromParents | None
"""What a commit states it replaces: a record id, None (create-if-absent), or
:data:`FROM_PARENTS`."""


def check_commit_rules(record: Record, *, head: HeadEntry | None, last_seq: int,
                       last_id: RecordId | None, expected_head: ExpectedHead,
                       key_of: Callable[[RecordId], str | None]) -> None:
    """The owner's sequence and base rules for one commit (planfence App. A), pure.

    A backend calls this inside its critical section with the head and owner sequence it
    read there, then writes only if it returns. Compare-and-set on the base: with
    ``expected_head`` a record id, the current head must be that record; with None, the
    key must have no head (create-if-absent); with :data:`FROM_PARENTS`, the current head
    must be ``record.supersedes`` when the record names one, else (if any) it must be
    among ``record.parents`` (a legacy same-key parent). A record that names
    ``supersedes`` must supersede the current head whatever ``expected_head`` says.

    Args:
        record: the verified new version.
        head: the key's current head (None when the key has none).
        last_seq: the owner's last committed sequence (0 when none).
        last_id: the record id at ``last_seq``.
        expected_head: see above.
        key_of: key of a record id known to the store, or None (names the expected base
            in the error for :data:`FROM_PARENTS`).

    Raises:
        HeadConflict: the stated base is not the current head (fields ``key``,
            ``expected``, ``current``); retryable.
        SequenceConflict: ``record.seq`` was already used with another id.
        SequenceError: ``record.seq`` is below the owner's last sequence.
    """
    current = None if head is None else head.record_id
    if expected_head is FROM_PARENTS and record.supersedes is not None:
        ok = current == record.supersedes
        expected = record.supersedes
    elif expected_head is FROM_PARENTS:
        ok = current is None or current in record.parents
        expected = None
        if not ok:
            expected = next((p for p in record.parents if key_of(p) == record.key), None)
    else:
        ok = current == expected_head and (record.supersedes is None
                                           or record.supersedes == current)
        expected = expected_head
    if not ok:
        raise HeadConflict("the commit's base is not the key's current head", key=record.key,
                           expected=expected, current=current, record=record.id)
    if record.seq == last_seq:
        raise SequenceConflict("owner sequence already used by another record",
                               key=record.key, owner=record.owner, seq=record.seq,
                               existing=last_id, record=record.id)
    if record.seq < last_seq:
        raise SequenceError("owner sequence must increase", key=record.key,
                            owner=record.owner, seq=record.seq, last_seq=last_seq)


@dataclass(frozen=True, slots=True)
class HeadEntry:
    """An owner's current head for one key.

    Attributes:
        key: the semantic key.
        record_id: H(key).
        seq: the head record's owner sequence.
        record: the head record itself when the reply inlines it (small changed record),
            else None.
    """

    key: str
    record_id: RecordId
    seq: int
    record: Record | None = None


@dataclass(frozen=True, slots=True)
class CommitResult:
    """Outcome of :meth:`Store.commit`.

    Attributes:
        record: the committed record.
        created: False when the identical record was already committed (idempotent).
        lineage_complete: False when some ancestor is not available yet.
    """

    record: Record
    created: bool
    lineage_complete: bool


@dataclass(frozen=True, slots=True)
class CommitOp:
    """One commit of a group (:meth:`Store.commit_many`): the arguments of :meth:`Store.commit`.

    Attributes:
        record: the new version.
        writer: the agent claiming to write it (authenticated by the caller).
        expected_head: the head it replaces (:data:`FROM_PARENTS`, a record id, or None).
        verified: the caller verified ``record`` itself (:meth:`Record.verify`: the
            owner service's decoder does, :func:`icore.records.record_from_wire`) and
            nothing changed it since, so the store does not verify it again (issue 27).
            Every owner rule still applies. Leave False for any other record.
        encoded: ``record`` in :func:`icore.records.encode_record`'s layout as it arrived
            (the owner service's decoder: :attr:`icore.net.Commit.encoded`), stored as is
            instead of encoding the record again (issue 27); None: the store encodes it.
            Only with ``verified``: the bytes must decode to ``record``.
    """

    record: Record
    writer: str
    expected_head: ExpectedHead = FROM_PARENTS
    verified: bool = False
    encoded: bytes | None = None


_result = positional(CommitResult)  # every field, no per-field setattr (issue 27)


class Store(abc.ABC):
    """One agent's public memory: its own records and heads plus a replica cache.

    Args:
        ownership: the team's ownership map.
        agent: the agent whose keys this store is authoritative for; None makes it a
            central store that accepts commits from every owner (centralized lineage).
    """

    blocking_writes: ClassVar[bool] = False
    """True when commits wait for disk I/O (servers then run them off their event loop)."""

    _write_reports_held: ClassVar[bool] = False
    """:meth:`_write_commit` returns False (writes nothing) for a record already held."""

    def __init__(self, ownership: OwnershipMap, agent: str | None = None) -> None:
        """Check the arguments' types (issue 29), then keep them.

        Raises:
            OwnershipError: ``ownership`` is not an :class:`OwnershipMap`, or ``agent`` is
                neither None nor a non-empty string.
        """
        if not isinstance(ownership, OwnershipMap):
            raise OwnershipError(f"ownership must be an OwnershipMap (e.g. OwnershipMap."
                                 f"from_mapping({{'req/*': 'planner'}})), not "
                                 f"{type(ownership).__name__}", field="ownership")
        if agent is not None and (not isinstance(agent, str) or not agent):
            raise OwnershipError(f"agent must be a non-empty agent name or None, not "
                                 f"{agent!r}"[:120], field="agent")
        self.ownership = ownership
        self.agent = agent
        self._closed = False

    # -- backend primitives -----------------------------------------------------------
    @abc.abstractmethod
    def _get_raw(self, rid: RecordId) -> Record | None: ...

    @abc.abstractmethod
    def _head_raw(self, key: str) -> HeadEntry | None: ...

    @abc.abstractmethod
    def _owner_seq(self, owner: str) -> tuple[int, RecordId | None]:
        """Return (last sequence, record id at that sequence) for ``owner``."""

    @abc.abstractmethod
    def _critical(self) -> contextlib.AbstractContextManager[None]:
        """Enter the store's critical section (re-entrant).

        Reads and writes inside it see and change one consistent state, and no other
        writer of this store - thread or, for a shared file, process - commits or installs
        in between. :meth:`commit` and :meth:`install` run their checks and writes in it.
        """

    @abc.abstractmethod
    def _write_commit(self, rec: Record, complete: bool, encoded: bytes | None = None
                      ) -> bool | None:
        """Store ``rec``, move its head and the owner sequence (inside :meth:`_critical`).

        ``encoded``: ``rec`` already in :func:`~icore.records.encode_record`'s layout (as
        received), for a store that keeps encoded records; None: encode it.

        Returns:
            False - only in a store with :attr:`_write_reports_held` - when ``rec`` was
            already held with its content: nothing was written, no head moved.
        """

    @abc.abstractmethod
    def _write_install(self, rec: Record, complete: bool, move_installed: bool) -> None: ...

    @abc.abstractmethod
    def _installed_raw(self, key: str) -> HeadEntry | None: ...

    @abc.abstractmethod
    def _incomplete_ids(self) -> set[RecordId]: ...

    @abc.abstractmethod
    def _mark_complete(self, rid: RecordId) -> None: ...

    @abc.abstractmethod
    def _has_content(self, rid: RecordId) -> bool: ...

    @abc.abstractmethod
    def _store_content(self, rec: Record) -> None: ...

    @abc.abstractmethod
    def _head_keys(self) -> list[str]: ...

    @abc.abstractmethod
    def _close(self) -> None: ...

    # -- public API -------------------------------------------------------------------
    def _check_open(self, **args: object) -> None:
        """Refuse a closed store; then each keyword argument that is no str (its name)."""
        if self._closed:
            raise StoreClosed("the store is closed", agent=self.agent)
        for name, value in args.items():
            need_str(name, value)

    def _is_complete(self, rec: Record, incomplete: set[RecordId]) -> bool:
        """Every input of ``rec`` is held and complete (the lineage rule, icore.records).

        A chain link (a same-key parent; ``supersedes`` is never a parent) need not be
        complete, or held when ``supersedes`` names the base; a parent that is not held
        cannot be told apart from an input, so it makes ``rec`` incomplete (fail closed).
        """
        for p in lineage_inputs(rec, self._get_raw):
            if isinstance(p, str) or p.id in incomplete:
                return False
        return True

    def _key_of(self, rid: RecordId) -> str | None:
        rec = self._get_raw(rid)
        return None if rec is None else rec.key

    def commit(self, record: Record, *, writer: str,
               expected_head: ExpectedHead = FROM_PARENTS) -> CommitResult:
        """Commit one of the writer's own records and make it the key's head.

        Compare-and-set on the base: the commit states which head it replaces, and is
        accepted only if that is the key's current head. By default (:data:`FROM_PARENTS`)
        that is ``record.supersedes`` (the owner's chain link, not an input: see
        :func:`icore.records.derive`), else the version of ``record.key`` among the
        record's exact parents, or no head at all when it cites none (a creation). Pass
        ``expected_head`` - the head id the writer read, or None for create-if-absent -
        when the new version is re-derived from fresh inputs and names no previous
        version. All checks and the write
        happen in one critical section; on a conflict nothing is written.

        Retry on :class:`~icore.errors.CommitConflict` (``retryable``): re-read the head
        and ``next_seq``, re-derive the record from the current inputs, commit again.

        Args:
            record: the new version (verified here).
            writer: the agent claiming to write it.
            expected_head: the head this commit replaces (see above).

        Returns:
            :class:`CommitResult`.

        Raises:
            MalformedRecord / RecordIdMismatch: the record is invalid or not a
                :class:`~icore.records.Record` at all, ``writer`` is not a non-empty
                string, or ``expected_head`` is neither a record id, None nor
                FROM_PARENTS.
            OwnershipError: the key has no owner, the writer is not its owner, the record
                names another owner, or this store does not host that owner's keys.
            HeadConflict: the stated base is not the current head (names key, expected,
                current).
            SequenceError: the owner sequence did not increase.
            SequenceConflict: the sequence was already used with another record id.
            StoreClosed: the store is closed.
        """
        return self._commit(record, writer, expected_head, False)

    def _commit(self, record: Record, writer: str, expected_head: ExpectedHead,
                verified: bool, encoded: bytes | None = None) -> CommitResult:
        """:meth:`commit`; ``verified``: the caller already ran ``record.verify()``.

        ``encoded``: the record's encoding as received (:attr:`CommitOp.encoded`).
        """
        owner = _commit_owner(self, record, writer, expected_head, verified)
        with self._critical():
            return self._commit_locked(record, owner, expected_head, verified, encoded)

    def _commit_locked(self, record: Record, owner: str, expected_head: ExpectedHead,
                       verified: bool, encoded: bytes | None) -> CommitResult:
        """The rest of :meth:`commit`, inside :meth:`_critical` (after the checks)."""
        held_first = not self._write_reports_held
        if held_first and self._held(record, owner):
            # the identical record was already committed: idempotent replay of a write
            return _result(record, False, record.id not in self._incomplete_ids())
        last_seq, last_id = self._owner_seq(owner)
        try:
            check_commit_rules(record, head=self._head_raw(record.key), last_seq=last_seq,
                               last_id=last_id, expected_head=expected_head, key_of=self._key_of)
        except IcoreError:
            if held_first or not self._held(record, owner):
                raise
            return _result(record, False, record.id not in self._incomplete_ids())
        complete = self._is_complete(record, self._incomplete_ids())
        if self._write_commit(record, complete, encoded if verified else None) is False:
            return _result(record, False, record.id not in self._incomplete_ids())
        return _result(record, True, complete)

    def _held(self, record: Record, owner: str) -> bool:
        """``record`` is held with its content and names ``owner``: a replay."""
        got = self._get_raw(record.id)
        return got is not None and got.owner == owner and self._has_content(record.id)

    def commit_many(self, ops: Sequence[CommitOp]) -> list[CommitResult | IcoreError]:
        """Group commit: several commits in one critical section (issue 17).

        Each op is checked by every owner rule of :meth:`commit` against the state the ops
        before it left, exactly as if they were committed one after another (an op marked
        ``verified`` skips only the record's second verification); a refused op
        writes nothing and does not stop the others. The whole group is one write
        transaction (SQLite: one ``COMMIT``, so one fsync with ``synchronous=FULL``), so
        the caller acknowledges every accepted op only after this returns.

        Args:
            ops: the commits, in the order they are to be applied.

        Returns:
            Per op, in order, its :class:`CommitResult` or the typed refusal (an
            :class:`~icore.errors.IcoreError` such as ``HeadConflict``, ``SequenceError``,
            ``OwnershipError``).

        Raises:
            StoreClosed: the store is closed.
            StoreError: the group's write failed (SQLite: a full disk, an I/O error;
                another backend's own exception as it is); nothing of it was written.
        """
        self._check_open()
        out: list[CommitResult | IcoreError] = []
        wrapped = type(self)._commit is not Store._commit  # a backend's own per-op step
        with self._critical():  # one level for the group, none per op (issue 27)
            for op in ops:
                try:
                    rec, exp, verified = op.record, op.expected_head, op.verified is True
                    if wrapped:
                        out.append(self._commit(rec, op.writer, exp, verified, op.encoded))
                    else:
                        out.append(self._commit_locked(
                            rec, _commit_owner(self, rec, op.writer, exp, verified), exp,
                            verified, op.encoded))
                except IcoreError as exc:
                    out.append(exc)
        return out

    def install(self, record: Record) -> bool:
        """Install another owner's record (or envelope) into the replica cache.

        The record is verified; it never moves an authoritative head. The installed head
        (this replica's view of ``record.key``, used by the local-replica and metadata-sync
        policies) moves when the record's sequence is larger. Installing content for an
        envelope already present attaches it.

        Returns:
            True when the installed head moved.

        Raises:
            MalformedRecord / RecordIdMismatch: the record is invalid (or no Record).
            OwnershipError: ``record.owner`` is not the key's declared owner.
        """
        self._check_open()
        need_record(record)
        record.verify()
        owner = self.ownership.owner_of(record.key)
        if owner is None or owner != record.owner:
            raise OwnershipError("record names an owner the map does not declare",
                                 key=record.key, owner=owner, record_owner=record.owner)
        with self._critical():
            return self._install(record)

    def _install(self, record: Record) -> bool:
        existing = self._get_raw(record.id)
        if existing is not None:
            if record.has_content and not self._has_content(record.id):
                self._store_content(record)
            cur = self._installed_raw(record.key)
            move = cur is None or record.seq > cur.seq
            if move:
                self._write_install(record, True, True)
            return move
        cur = self._installed_raw(record.key)
        move = cur is None or record.seq > cur.seq
        complete = self._is_complete(record, self._incomplete_ids())
        self._write_install(record, complete, move)
        self._recheck_incomplete()
        return move

    def _recheck_incomplete(self) -> None:
        incomplete = self._incomplete_ids()
        changed = True
        while changed and incomplete:
            changed = False
            for rid in list(incomplete):
                rec = self._get_raw(rid)
                if rec is not None and self._is_complete(rec, incomplete - {rid}):
                    self._mark_complete(rid)
                    incomplete.discard(rid)
                    changed = True

    def get(self, rid: RecordId) -> Record | None:
        """Return the record (own or cached) with that id, complete or not.

        Raises:
            OwnershipError: ``rid`` is no str (as every read: a key or owner no str too).
        """
        self._check_open(rid=rid)
        return self._get_raw(rid)

    def lookup(self, rid: RecordId) -> Record | None:
        """Lineage lookup for the gate: the verified record, or None.

        None when the record is absent, lineage incomplete, or the store is closed.

        A lineage-incomplete record (some ancestor not available) is never returned, so
        the walk of planfence Alg. 1 line 1 blocks on it: it can authorize nothing, as a
        boundary or as an ancestor (design.md 3.1). It becomes visible once its missing
        ancestors are installed.
        """
        if self._closed:
            return None
        need_str("rid", rid)
        rec = self._get_raw(rid)
        if rec is None:
            return None
        if rid in self._incomplete_ids() and not self.is_complete(rid):
            return None
        return rec

    def head(self, key: str) -> HeadEntry | None:
        """Return the authoritative head H(key) held by this store, or None."""
        self._check_open(key=key)
        return self._head_raw(key)

    def heads(self, keys: Iterable[str], *, known: dict[str, RecordId] | None = None,
              inline_max_bytes: int = 0) -> dict[str, HeadEntry]:
        """Return heads for ``keys`` (missing keys are absent from the result).

        Args:
            keys: semantic keys.
            known: the caller's frontier ids; a head that differs and whose content is
                at most ``inline_max_bytes`` is returned with its record inlined.
            inline_max_bytes: inline threshold in bytes (0 disables inlining).
        """
        self._check_open()
        out: dict[str, HeadEntry] = {}
        for k in need_strs("keys", keys):
            h = self._head_raw(k)
            if h is None:
                continue
            if inline_max_bytes and known is not None and known.get(k) != h.record_id:
                rec = self._get_raw(h.record_id)
                if rec is not None and rec.size <= inline_max_bytes:
                    h = HeadEntry(h.key, h.record_id, h.seq, rec)
            out[k] = h
        return out

    def head_keys(self) -> list[str]:
        """Return every key with an authoritative head in this store."""
        self._check_open()
        return self._head_keys()

    def installed_head(self, key: str) -> HeadEntry | None:
        """Return this replica's installed view of ``key`` (own head for own keys)."""
        self._check_open(key=key)
        own = self._head_raw(key)
        inst = self._installed_raw(key)
        if own is not None and (inst is None or own.seq >= inst.seq):
            return own
        return inst

    def owner_seq(self, owner: str) -> int:
        """Return the last committed sequence for ``owner`` (0 when none)."""
        self._check_open(owner=owner)
        return self._owner_seq(owner)[0]

    def next_seq(self, owner: str | None = None) -> int:
        """Return the next owner sequence to use for ``owner`` (default: this agent).

        Raises:
            OwnershipError: neither ``owner`` nor the store's agent is given.
        """
        who = owner or self.agent
        if who is None:
            raise OwnershipError("a central store needs an explicit owner for next_seq")
        return self.owner_seq(who) + 1

    def is_complete(self, rid: RecordId) -> bool:
        """Return True when the record is present and every ancestor is available."""
        self._check_open(rid=rid)
        if self._get_raw(rid) is None:
            return False
        if rid in self._incomplete_ids():
            self._recheck_incomplete()
        return rid not in self._incomplete_ids()

    def fetch(self, ids: Sequence[RecordId]) -> list[Record]:
        """Return the records with these ids that this store holds, in order."""
        self._check_open()
        out = []
        for rid in need_strs("ids", ids):
            r = self._get_raw(rid)
            if r is not None:
                out.append(r)
        return out

    def close(self) -> None:
        """Close the store; later calls raise StoreClosed. Idempotent."""
        if not self._closed:
            self._closed = True
            self._close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _commit_owner(store: Store, record: Record, writer: str,
                  expected_head: ExpectedHead, verified: bool) -> str:
    """The checks of :meth:`Store.commit` that read no state; return the key's owner."""
    store._check_open()
    need_record(record)
    if not isinstance(writer, str) or not writer:
        raise MalformedRecord(f"writer must be a non-empty agent name, not "
                              f"{type(writer).__name__}", key=record.key, field="writer")
    if not (expected_head is FROM_PARENTS or expected_head is None
            or is_record_id(expected_head)):
        raise MalformedRecord("expected_head must be a record id, None or FROM_PARENTS",
                              key=getattr(record, "key", None), field="expected_head")
    if not verified:
        record.verify()
    if not record.has_content:
        raise OwnershipError("a commit must carry the record content", key=record.key,
                             record=record.id)
    owner = store.ownership.owner_of(record.key)
    if owner is None:
        raise OwnershipError("no owner is declared for this key", key=record.key,
                             record=record.id)
    if writer != owner or record.owner != owner:
        raise OwnershipError("only the key's owner may write it", key=record.key,
                             owner=owner, writer=writer, record_owner=record.owner)
    if store.agent is not None and owner != store.agent:
        raise OwnershipError("this store hosts another agent's keys", key=record.key,
                             owner=owner, store_agent=store.agent)
    return owner
