"""The run manifest: embedded defaults, validation errors with paths, net composition."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml

from icore.agents import ManifestError, default_manifest, load_manifest, manifest_from_dict
from icore.agents._workflow import FAMILY_SPECS, eligible, make_task
from icore.net import TeamManifest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.mark.parametrize("family", sorted(FAMILY_SPECS))
def test_embedded_manifests_load(family: str) -> None:
    """Every family has an embedded default with five roles and its protected tool."""
    m = default_manifest(family)
    assert m.family == family
    assert {a.role for a in m.agents} == {"planner", "retriever", "reviser", "executor",
                                          "auditor"}
    assert m.tool(FAMILY_SPECS[family].action).depends_on == ("req/{task}",)
    assert m.backend.kind == "scripted"


@pytest.mark.parametrize("family", sorted(FAMILY_SPECS))
def test_examples_copies_match_embedded(family: str) -> None:
    """The copies in examples/ are the embedded manifests."""
    assert load_manifest(EXAMPLES / "live" / f"{family}.yaml") == default_manifest(family)


def test_validation_error_names_the_path(tmp_path: Path) -> None:
    """A bad field is reported with its path."""
    data = default_manifest().model_dump()
    data["agents"][0]["role"] = "wizard"
    with pytest.raises(ManifestError) as ei:
        manifest_from_dict(data)
    assert ei.value.fields["path"].startswith("agents.0.role")
    data = default_manifest().model_dump()
    data["policy"] = "local_replica"
    with pytest.raises(ManifestError) as ei:
        manifest_from_dict(data)
    assert ei.value.fields["path"] == "policy"
    p = tmp_path / "m.yaml"
    p.write_text(": : not yaml", encoding="utf-8")
    with pytest.raises(ManifestError):
        load_manifest(p)


def test_semantic_checks() -> None:
    """Missing roles, unknown owners and a missing tool are refused."""
    base = default_manifest().model_dump()
    bad = dict(base, agents=base["agents"][:4])
    with pytest.raises(ManifestError, match="exactly one"):
        manifest_from_dict(bad)
    bad = dict(base, ownership={**base["ownership"], "req/*": "nobody"})
    with pytest.raises(ManifestError, match="unknown agent"):
        manifest_from_dict(bad)
    bad = dict(base, tools=[{"name": "ship", "depends_on": ["req/{task}"]}])
    with pytest.raises(ManifestError, match="book"):
        manifest_from_dict(bad)
    bad = dict(base, extra_field=1)
    with pytest.raises(ManifestError):
        manifest_from_dict(bad)


def test_team_manifest_composition(tmp_path: Path) -> None:
    """A run manifest yields the net team manifest (central service under centralized)."""
    m = default_manifest()
    t = m.team_manifest(tmp_path)
    assert isinstance(t, TeamManifest)
    assert t.agent_ids == [a.id for a in m.agents]
    assert t.ownership_map().owner_of("req/x") == "reviser-1"
    assert t.store_path("planner-1").parent == tmp_path / "agents"
    tc = m.team_manifest(tmp_path, policy="centralized_lineage")
    assert "central" in tc.agent_ids
    assert TeamManifest.parse(yaml.safe_load(t.to_yaml())).agent_ids == t.agent_ids


@pytest.mark.parametrize("family", sorted(FAMILY_SPECS))
def test_task_revision_invalidates_every_initial_candidate(family: str) -> None:
    """No candidate eligible before the revision is eligible after it (stale = wrong)."""
    for seed in range(10):
        t = make_task(family, seed)
        before = {c["id"] for c in eligible(t.requirement, t.catalog, family)}
        after = {c["id"] for c in eligible(t.revision, t.catalog, family)}
        assert before and after and not (before & after)
        assert make_task(family, seed) == t


def test_unknown_family_is_a_manifest_error() -> None:
    """An unknown family is a typed ManifestError (still a ValueError) listing the known."""
    with pytest.raises(ManifestError, match="reservation") as ei:
        default_manifest("nosuch")
    assert isinstance(ei.value, ValueError) and ei.value.fields["path"] == "family"


@pytest.mark.parametrize("data", [b"\xff\xfe\x00\x81", b"[" * 100_000 + b"]" * 100_000])
def test_unreadable_manifest_file(tmp_path: Path, data: bytes) -> None:
    """Non-UTF-8 or absurdly nested YAML is a ManifestError naming the file."""
    p = tmp_path / "run.yaml"
    p.write_bytes(data)
    with pytest.raises(ManifestError) as ei:
        load_manifest(p)
    assert ei.value.fields["file"] == str(p)


@pytest.mark.timeout(30)
def test_cli_refuses_a_fifo_manifest(tmp_path: Path) -> None:
    """``icore run FIFO`` would block reading the named pipe: ``error:`` naming it, exit 2,
    and no run starts."""
    from typer.testing import CliRunner

    from icore.cli import app

    fifo = tmp_path / "run.yaml"
    os.mkfifo(fifo)
    out = tmp_path / "out"
    res = CliRunner().invoke(app, ["run", str(fifo), "--out", str(out)],
                             env={"COLUMNS": "200"})
    assert res.exit_code == 2, res.output
    assert "error:" in res.output and str(fifo) in res.output and "FIFO" in res.output
    assert not out.exists()
