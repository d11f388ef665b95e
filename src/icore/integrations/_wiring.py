"""Memory wiring for integrations (planfence Sec. 3.1, 4.2).

Replicate records to the agents that need them, and name keys (not bare record ids) in
what a blocked call reports.

In a framework app every agent usually runs in one process, each with its own
:class:`~icore.memory.Store` (its replica). The gate validates against the executor's
replica and the owners' heads; a record the executor never received makes the gate block
``lineage_incomplete``. :class:`Replicator` does the installs a team would otherwise write
by hand (commit at the owner, install the record and its ancestors into each replica that
needs the key), and :meth:`Replicator.explain` turns the 64-hex ids in a gate's detail
into ``key seq <n>`` names a model (or a person) can act on.
"""

from __future__ import annotations

import fnmatch
import re
import threading
from collections.abc import Iterable, Mapping, Sequence

from icore.errors import IntegrationError
from icore.memory import FROM_PARENTS, CommitResult, ExpectedHead, Store
from icore.records import Record, RecordId

_ID = re.compile(r"\b[0-9a-f]{64}\b")


class Replicator:
    """Commits at owners and installs into the replicas that need each key.

    Args:
        stores: agent id -> that agent's store (owners' authoritative stores and the
            executors' replicas alike).
        needs: agent id -> key globs the agent's replica must hold (``"req/*"``);
            an agent without an entry needs every key.

    Raises:
        IntegrationError: ``needs`` names an agent without a store.
    """

    def __init__(self, stores: Mapping[str, Store],
                 needs: Mapping[str, Iterable[str]] | None = None) -> None:
        self.stores = dict(stores)
        self.needs = {a: tuple(p) for a, p in (needs or {}).items()}
        unknown = sorted(set(self.needs) - set(self.stores))
        if unknown:
            raise IntegrationError("needs names agents without a store", agents=unknown)
        self._lock = threading.Lock()

    def wants(self, agent: str, key: str) -> bool:
        """Whether ``agent``'s replica needs ``key``."""
        pats = self.needs.get(agent)
        return pats is None or any(fnmatch.fnmatchcase(key, p) for p in pats)

    def find(self, rid: RecordId) -> Record | None:
        """The record with id ``rid`` from any known store (None when no store holds it)."""
        for s in self.stores.values():
            r = s.get(rid)
            if r is not None and r.has_content:
                return r
        return None

    def _lineage(self, record: Record) -> list[Record]:
        out: list[Record] = []
        seen: set[RecordId] = set()
        stack = [record]
        while stack:
            r = stack.pop()
            if r.id in seen:
                continue
            seen.add(r.id)
            out.append(r)
            for p in r.parents:
                parent = self.find(p)
                if parent is None:
                    raise IntegrationError("a parent of the record is in no known store",
                                           key=r.key, parent=p[:12])
                stack.append(parent)
        return out[::-1]

    def publish(self, record: Record, *, to: Sequence[str] | None = None) -> list[str]:
        """Install ``record`` and its ancestors into every replica that needs its key.

        Args:
            record: a committed record.
            to: only these agents (default: every agent whose ``needs`` match the key,
                except the key's owner).

        Returns:
            The agents whose replica received the record.

        Raises:
            IntegrationError: ``to`` names an agent without a store, or an ancestor is
                in no known store (the message names the key).
        """
        targets = list(to) if to is not None else [
            a for a in self.stores if a != record.owner and self.wants(a, record.key)]
        missing = [a for a in targets if a not in self.stores]
        if missing:
            raise IntegrationError("no store for agents", agents=missing, key=record.key)
        chain = self._lineage(record)
        with self._lock:
            for agent in targets:
                store = self.stores[agent]
                for r in chain:
                    if r.owner != agent:
                        store.install(r)
        return targets

    def commit(self, record: Record, *, to: Sequence[str] | None = None,
               expected_head: ExpectedHead = FROM_PARENTS) -> CommitResult:
        """Commit ``record`` at its owner's store, then :meth:`publish` it.

        Args:
            record: the owner's new version.
            to: as in :meth:`publish`.
            expected_head: the compare-and-set base (``Store.commit``): by default the
                current head must be among the record's parents; pass the head it
                replaces for a plan re-derived from fresh inputs.

        Raises:
            IntegrationError: the owner has no store here.
            StoreError: the owner rules refuse the commit, e.g. ``HeadConflict`` (another
                writer moved the head; nothing is written or installed).
        """
        store = self.stores.get(record.owner)
        if store is None:
            raise IntegrationError("the record's owner has no store here", key=record.key,
                                   owner=record.owner)
        res = store.commit(record, writer=record.owner, expected_head=expected_head)
        self.publish(record, to=to)
        return res

    def missing(self, store: Store, roots: Sequence[RecordId]) -> list[str]:
        """``key seq <n>`` of every record on the roots' lineage that ``store`` lacks.

        These are the records to replicate before the call can run, in traversal order.
        """
        out: list[str] = []
        seen: set[RecordId] = set()
        stack = list(roots)
        while stack:
            rid = stack.pop()
            if rid in seen:
                continue
            seen.add(rid)
            here = store.get(rid)
            if here is None or not here.has_content:
                out.append(self.name(rid))
            r = self.find(rid)
            if r is not None:
                stack.extend(r.parents)
        return out

    def name(self, rid: str) -> str:
        """``key seq <n>`` for a record id (``unknown record <prefix>`` when no store has it).

        ``n`` is the owner sequence (over all the owner's keys, planfence App. A), never
        written ``v<n>``, which reads as a count of the key's versions.
        """
        r = self.find(rid)
        if r is None:
            return f"unknown record {rid[:12]}"
        return f"{r.key} seq {r.seq}"

    def explain(self, text: str) -> str:
        """``text`` with every 64-hex record id replaced by its :meth:`name`."""
        return _ID.sub(lambda m: self.name(m.group(0)), text)
