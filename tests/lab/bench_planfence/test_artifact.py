"""The large-artifact safety control (planfence App. A.6, App. B)."""

from __future__ import annotations

import dataclasses

import pytest

from icore.fence import Policy
from icore.records import Record
from icore_lab.bench import NetSpec, PolicySpec, replay
from icore_lab.bench.planfence._analysis import aggregate, orderings
from icore_lab.bench.planfence._presets import ARTIFACT_BYTES, PAPER_STUDIES, preset_cells
from icore_lab.bench.planfence._replay import Episode
from icore_lab.bench.planfence._run import run_cells
from icore_lab.bench.planfence._spec import ARTIFACT_KEY
from icore_lab.workloads import TEMPLATES, WorkloadParams, build_schedule

ART = WorkloadParams(rho=2.0, work_units=16, artifact_bytes=ARTIFACT_BYTES)


def test_preset_is_960_runs_of_16_actions() -> None:
    """4 networks x 30 templates x 8 policies, rho=2 and H=64: 15,360 actions; part of
    the paper preset."""
    cells = preset_cells("artifact")
    assert sum(len(c.templates) * len(c.specs) for c in cells) == 960
    assert sum(c.scheduled_actions() for c in cells) == 15_360
    assert "artifact" in PAPER_STUDIES
    assert {s.label for s in cells[0].specs} >= {"planfence", "centralized_lineage",
                                                 "metadata_sync_k1", "owner_head_freshness"}


def test_the_artifact_does_not_change_the_schedule() -> None:
    """Paired: the schedule is identical with and without the artifact."""
    a = build_schedule(TEMPLATES[3], dataclasses.replace(ART, artifact_bytes=0))
    b = build_schedule(TEMPLATES[3], ART)
    assert a.steps == b.steps and a.initial == b.initial


@pytest.mark.parametrize("policy", [Policy.PLANFENCE, Policy.CENTRALIZED_LINEAGE,
                                    Policy.METADATA_SYNC, Policy.OWNER_HEAD_FRESHNESS])
def test_two_verified_fetches_per_action(policy: Policy) -> None:
    """Every policy fetches the changed artifact twice per action and verifies it; its
    bytes ride on the action (the artifact spans many packets)."""
    s = build_schedule(TEMPLATES[0], ART)
    with_art = replay(s, PolicySpec(policy), NetSpec(link="loopback"))
    plain = replay(build_schedule(TEMPLATES[0], dataclasses.replace(ART, artifact_bytes=0)),
                   PolicySpec(policy), NetSpec(link="loopback"))
    assert all(r.artifact_fetches == 2 and r.artifact_violations == 0
               for r in with_art.rows)
    assert with_art.total_bytes - plain.total_bytes > 2 * ARTIFACT_BYTES * len(with_art.rows)
    assert [r.invalid for r in with_art.rows] == [r.invalid for r in plain.rows]


class _ForgedArtifact(Episode):
    """An owner whose changed artifact does not descend from the published one."""

    def _setup_artifact(self) -> None:
        super()._setup_artifact()
        owner = self.artifact_owner
        forged = Record.create(key=ARTIFACT_KEY, owner=owner,
                               seq=self.stores[owner].next_seq(), type="artifact",
                               content={"blob": "x" * self.artifact_bytes, "rev": 9})
        # the owner replaces its head explicitly (compare-and-set on the head it read), so
        # the new version is its key's head without citing the published one
        store = self.stores[owner]
        head = store.head(ARTIFACT_KEY)
        store.commit(forged, writer=owner, expected_head=head and head.record_id)
        self.truth[forged.id] = forged


def test_a_version_without_the_exact_parent_is_a_violation() -> None:
    """A fetched artifact whose exact parent is not the published version fails the
    verification (counted as a violation, never as a verified fetch)."""
    s = build_schedule(TEMPLATES[1], ART)
    res = _ForgedArtifact(s, PolicySpec(Policy.PLANFENCE), NetSpec(link="loopback")).run()
    assert all(r.artifact_violations == 2 and r.artifact_fetches == 0 for r in res.rows)


def test_orderings_on_a_small_run() -> None:
    """The control's orderings read the rows: exact lineage safe, two fetches each."""
    cells = [dataclasses.replace(c, params=dataclasses.replace(c.params, work_units=16),
                                 templates=TEMPLATES[:2])
             for c in preset_cells("artifact") if c.net.link == "loopback"]
    res = run_cells(cells)
    got = {o.id: o for o in orderings(aggregate(res.rows))}
    assert got["artifact.safe"].reproduced and got["artifact.fetches"].reproduced
    assert "stale control (owner-head freshness)" in got["artifact.safe"].measured
