"""The large-artifact control of the replay (planfence App. B, ``artifact`` preset).

Every policy must fetch the artifact's current version from its owner and verify it
(:func:`fetch_artifact`); :func:`setup_artifact` publishes v0 and changes it to v1 before
the episode. Used by :class:`~icore_lab.bench.planfence._episode.Episode`.
"""

from __future__ import annotations

from typing import Any, Protocol

from icore.fence import PolicyStrategy
from icore.memory import MemoryStore
from icore.records import Record, RecordId, derive
from icore_lab.bench.planfence._spec import ARTIFACT_KEY, NetSpec, artifact_blob
from icore_lab.workloads import Schedule


class _ArtifactSide(Protocol):
    """What the artifact control reads and calls on its episode."""

    schedule: Schedule
    net: NetSpec
    strategy: PolicyStrategy
    stores: dict[str, MemoryStore]
    central: MemoryStore
    artifact_owner: str
    artifact_bytes: int
    artifact_base: RecordId | None

    def client(self, agent: str) -> Any: ...
    def _commit_local(self, rec: Record) -> None: ...
    def _block(self, make: Any, agent: str) -> None: ...


def setup_artifact(ep: _ArtifactSide) -> RecordId:
    """Set up the large-artifact control, so that every policy must fetch v1.

    The owner publishes v0 (the executor holds it), then changes it to v1 before the episode.

    Returns:
        The id of v0, the parent every verified fetch of v1 must cite.
    """
    sched, owner, size = ep.schedule, ep.artifact_owner, ep.artifact_bytes
    store = ep.stores[owner]
    v0 = Record.create(key=ARTIFACT_KEY, owner=owner, seq=store.next_seq(),
                       type="artifact",
                       content={"blob": artifact_blob(sched.template.id, 0, size),
                                "rev": 0})
    ep._commit_local(v0)
    ep.stores[sched.executor].install(v0)
    v1 = derive(key=ARTIFACT_KEY, owner=owner, seq=store.next_seq(), type="artifact",
                content={"blob": artifact_blob(sched.template.id, 1, size), "rev": 1},
                inputs=[v0])
    ep._commit_local(v1)
    if ep.strategy.central:
        ep.central.commit(v0, writer=owner)
        ep.central.commit(v1, writer=owner)
    return v0.id

def fetch_artifact(ep: _ArtifactSide, tally: dict[str, int]) -> None:
    """Fetch the artifact's current version from its owner (head, then content) and verify it.

    Verification checks the owner's head, a matching content address, the exact parent.
    """
    owner, n = ep.artifact_owner, ep.net
    cl = ep.client(ep.schedule.executor)
    got: list[Any] = []

    async def go() -> None:
        got.clear()
        rep = await cl.query_heads(owner, [ARTIFACT_KEY], timeout_s=n.timeout_s)
        h = rep.heads.get(ARTIFACT_KEY)
        recs = [] if h is None else await cl.fetch(owner, [h.record_id],
                                                    timeout_s=n.timeout_s)
        got.extend([h, recs])

    ep._block(go, ep.schedule.executor)
    h, recs = got
    truth = ep.stores[owner].head(ARTIFACT_KEY)
    ok = (h is not None and truth is not None and len(recs) == 1
          and recs[0].id == h.record_id == truth.record_id
          and ep.artifact_base in recs[0].parents
          and len(str((recs[0].content or {}).get("blob", ""))) == ep.artifact_bytes)
    if ok:
        try:
            recs[0].verify()
        except Exception:
            ok = False
    tally["artifact_fetches" if ok else "artifact_violations"] += 1
