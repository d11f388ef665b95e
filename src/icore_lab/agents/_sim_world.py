"""Ground truth of a simulated task run: results, specification records, Perf.

The world holds what iCORE cannot see: whether each result is really correct and which
specification version it was built against. Specifications are real PlanFence records
in a :class:`~icore.memory.MemoryStore` owned by ``env``; an owner revision commits a new
record, so certificates citing the old one are revoked through
``State.on_head_change`` (stale evidence, design.md 4.5).

Randomness is common across conditions: attempt ``k`` at item ``i`` draws the same
uniform in every condition (a hash of the seed, the item, the attempt number and the
purpose), so matched instances differ only by what the conditions did.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

from icore.memory import MemoryStore, OwnershipMap
from icore.records import Record, RecordId
from icore.state import StoreHeadView
from icore_lab.workloads import TaskInstance, terminal_performance

SPEC_OWNER = "env"
INPUTS_OWNER = "team"
"""Owner of the records workers derive from specifications (``inputs/<item>``)."""


def inputs_key(item_id: str) -> str:
    """Key of the input record a worker derives for ``item_id``."""
    return f"inputs/{item_id}"


def uniform(*parts: object) -> float:
    """A deterministic uniform in [0, 1) from ``parts`` (common random numbers)."""
    h = hashlib.sha256(":".join(str(p) for p in parts).encode()).digest()
    return int.from_bytes(h[:8], "big") / 2.0**64


@dataclass(slots=True)
class ItemTruth:
    """What is really true of one item."""

    result_correct: bool | None = None
    spec_version: int | None = None
    verified: bool = False
    dropped: bool = False
    attempts: int = 0


@dataclass(slots=True)
class SimWorld:
    """The ground truth of one run of a task instance."""

    inst: TaskInstance
    store: MemoryStore = field(init=False)
    version: dict[str, int] = field(default_factory=dict)
    heads: dict[str, Record] = field(default_factory=dict)
    truth: dict[str, ItemTruth] = field(default_factory=dict)
    injected: list[tuple[str, str]] = field(default_factory=list)
    """Ground-truth defects injected in this run: (defect kind, item id)."""
    lineage: StoreHeadView = field(init=False)
    """The owners' heads with derivation lineage (what the audit reads)."""

    def __post_init__(self) -> None:
        keys = self.inst.specs
        owners = {k: SPEC_OWNER for k in keys}
        owners.update({inputs_key(i.id): INPUTS_OWNER for i in self.inst.items})
        self.store = MemoryStore(OwnershipMap.from_mapping(owners))
        self.lineage = StoreHeadView(self.store)
        for k in keys:
            self._commit(k, 1)
        for it in self.inst.items:
            self.truth[it.id] = ItemTruth()

    def _commit(self, key: str, version: int) -> None:
        prev = self.heads.get(key)
        rec = Record.create(
            key=key,
            owner=SPEC_OWNER,
            seq=self.store.next_seq(SPEC_OWNER),
            content={"spec": key, "version": version},
            parents=(prev.id,) if prev is not None else (),
            type="spec",
        )
        self.store.commit(rec, writer=SPEC_OWNER)
        self.heads[key] = rec
        self.version[key] = version

    def derive_inputs(self, item_id: str, source: RecordId) -> RecordId:
        """A worker derives an input record for ``item_id`` from ``source``; returns its id.

        The record is a new version of ``inputs/<item>`` (parents: its previous version and
        the specification record ``source``). It is its key's head even when ``source``
        is no longer current.
        """
        key = inputs_key(item_id)
        prev = self.store.head(key)
        rec = Record.create(
            key=key,
            owner=INPUTS_OWNER,
            seq=self.store.next_seq(INPUTS_OWNER),
            content={"item": item_id, "from": str(source)},
            parents=((prev.record_id,) if prev is not None else ()) + (source,),
            type="inputs",
        )
        self.store.commit(rec, writer=INPUTS_OWNER)
        return rec.id

    def inject(self, kind: str, item: str) -> None:
        """Record a ground-truth defect.

        ``kind`` is ``unsupported_work``, ``assignment``, ``stall``, ``deletion`` or
        ``evidence_revocation``.
        """
        if (kind, item) not in self.injected:
            self.injected.append((kind, item))

    def revise(self, key: str) -> RecordId:
        """The owner revises ``key``; returns the new head id.

        Items whose recorded result was built on the old version now rest on stale
        evidence (an ``evidence_revocation`` defect).
        """
        old = self.version[key]
        for it in self.inst.items:
            t = self.truth[it.id]
            if it.spec == key and t.spec_version == old and t.result_correct is not None:
                self.inject("evidence_revocation", it.id)
        self._commit(key, old + 1)
        return self.heads[key].id

    def head_view(self, key: str) -> RecordId | None:
        """The owner's current head of ``key`` (a ``HeadView``)."""
        h = self.store.head(key)
        return None if h is None else h.record_id

    def correct(self, item_id: str) -> bool:
        """Whether the item's final result is correct against the current specification.

        An item that needs review must also be verified.
        """
        t = self.truth[item_id]
        item = next(i for i in self.inst.items if i.id == item_id)
        ok = (
            not t.dropped
            and t.result_correct is True
            and t.spec_version == self.version[item.spec]
        )
        return ok and (t.verified or not item.review)

    def performance(self) -> float:
        """Ground-truth terminal performance Perf (icore Sec. 5)."""
        return terminal_performance(self.inst, {i.id: self.correct(i.id) for i in self.inst.items})
