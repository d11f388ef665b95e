"""The run manifest: embedded defaults, validation errors with paths, net composition."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml

from icore.live import LiveManifestError, default_manifest, load_manifest, manifest_from_dict
from icore.live._workflow import FAMILY_SPECS, eligible, make_task
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
    with pytest.raises(LiveManifestError) as ei:
        manifest_from_dict(data)
    assert ei.value.fields["path"].startswith("agents.0.role")
    data = default_manifest().model_dump()
    data["policy"] = "no_such_policy"
    with pytest.raises(LiveManifestError) as ei:
        manifest_from_dict(data)
    assert ei.value.fields["path"] == "policy"
    p = tmp_path / "m.yaml"
    p.write_text(": : not yaml", encoding="utf-8")
    with pytest.raises(LiveManifestError):
        load_manifest(p)


def test_semantic_checks() -> None:
    """Missing roles, unknown owners and a missing tool are refused."""
    base = default_manifest().model_dump()
    bad = dict(base, agents=base["agents"][:4])
    with pytest.raises(LiveManifestError, match="exactly one"):
        manifest_from_dict(bad)
    bad = dict(base, ownership={**base["ownership"], "req/*": "nobody"})
    with pytest.raises(LiveManifestError, match="unknown agent"):
        manifest_from_dict(bad)
    bad = dict(base, tools=[{"name": "ship", "depends_on": ["req/{task}"]}])
    with pytest.raises(LiveManifestError, match="book"):
        manifest_from_dict(bad)
    bad = dict(base, extra_field=1)
    with pytest.raises(LiveManifestError):
        manifest_from_dict(bad)


def test_empty_seeds_are_refused_naming_the_field(tmp_path: Path) -> None:
    """``seeds: []`` would run no workflow and end like a clean run: a manifest error
    naming the file and ``seeds``."""
    data = default_manifest().model_dump()
    data["seeds"] = []
    p = tmp_path / "m.yaml"
    p.write_text(yaml.safe_dump(data), encoding="utf-8")
    with pytest.raises(LiveManifestError) as ei:
        load_manifest(p)
    assert ei.value.fields["path"] == "seeds" and ei.value.fields["file"] == str(p)


@pytest.mark.parametrize("name", ["", "   "])
def test_empty_name_is_refused_naming_file_and_field(tmp_path: Path, name: str) -> None:
    """An empty or blank ``name`` (the report title and team name): a manifest error
    naming the file and ``name``; ``icore run`` says so (exit 2, as every manifest error)
    before any agent starts."""
    from typer.testing import CliRunner

    from icore.cli import app

    data = default_manifest().model_dump()
    data["name"] = name
    p = tmp_path / "m.yaml"
    p.write_text(yaml.safe_dump(data), encoding="utf-8")
    with pytest.raises(LiveManifestError, match="needs a name") as ei:
        load_manifest(p)
    assert ei.value.fields == {"file": str(p), "path": "name"}
    out = tmp_path / "out"
    res = CliRunner().invoke(app, ["run", str(p), "--out", str(out)],
                             env={"COLUMNS": "500"}, terminal_width=500)
    assert res.exit_code == 2, res.output
    assert "path='name'" in res.output and "m.yaml" in res.output and not out.exists()


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
    """An unknown family is a typed LiveManifestError (still a ValueError) listing the known."""
    with pytest.raises(LiveManifestError, match="reservation") as ei:
        default_manifest("nosuch")
    assert isinstance(ei.value, ValueError) and ei.value.fields["path"] == "family"


@pytest.mark.parametrize("data", [b"\xff\xfe\x00\x81", b"[" * 100_000 + b"]" * 100_000])
def test_unreadable_manifest_file(tmp_path: Path, data: bytes) -> None:
    """Non-UTF-8 or absurdly nested YAML is a LiveManifestError naming the file."""
    p = tmp_path / "run.yaml"
    p.write_bytes(data)
    with pytest.raises(LiveManifestError) as ei:
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


@pytest.mark.timeout(30)
def test_load_manifest_refuses_a_fifo(tmp_path: Path) -> None:
    """The library loader refuses a named pipe by kind instead of blocking on it."""
    fifo = tmp_path / "run.yaml"
    os.mkfifo(fifo)
    with pytest.raises(LiveManifestError, match=r"is a FIFO \(named pipe\), not a regular file") \
            as ei:
        load_manifest(fifo)
    assert ei.value.fields["file"] == str(fifo) and str(fifo) in str(ei.value)


@pytest.mark.timeout(30)
def test_team_manifest_load_refuses_a_fifo(tmp_path: Path) -> None:
    """``TeamManifest.load`` refuses a named pipe by kind instead of blocking on it."""
    from icore.net import TeamManifestError

    fifo = tmp_path / "team.yaml"
    os.mkfifo(fifo)
    with pytest.raises(TeamManifestError,
                       match=r"is a FIFO \(named pipe\), not a regular file") as ei:
        TeamManifest.load(fifo)
    assert ei.value.fields["path"] == str(fifo) and str(fifo) in str(ei.value)


@pytest.mark.parametrize(("args", "option", "shown"), [
    (["--concurrency", "0"], "--concurrency", "greater than or equal to 1"),
    (["--concurrency", "-3"], "--concurrency", "greater than or equal to 1"),
    (["--concurrency", "65"], "--concurrency", "less than or equal to 64"),
    (["--repeat", "0"], "--repeat", "greater than or equal to 1"),
    (["--repeat", "-1"], "--repeat", "greater than or equal to 1"),
    (["--llm-timeout-s", "0"], "--llm-timeout-s", "got 0.0"),
    (["--llm-timeout-s", "-2.5"], "--llm-timeout-s", "got -2.5"),
    (["--llm-timeout-s", "nan"], "--llm-timeout-s", "got nan"),
    (["--llm-timeout-s", "inf"], "--llm-timeout-s", "got inf"),
    (["--llm-timeout-s", "601"], "--llm-timeout-s", "less than or equal to 600"),
    (["--matched", "--concurrency", "0"], "--concurrency", "greater than or equal to 1"),
    (["--seeds", ""], "--seeds", "names no value"),
    (["--seeds", " , "], "--seeds", "names no value"),
    (["--matched", "--seeds", ""], "--seeds", "names no value"),
])
def test_cli_run_refuses_bad_values(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                    args: list[str], option: str, shown: str) -> None:
    """0, negative, NaN or infinite counts and timeouts are usage errors (exit 2) naming
    the option, never silently replaced by the manifest's value; no run starts."""
    from typer.testing import CliRunner

    import icore.cli._run as run_cmd
    from icore.cli import app

    def started(*_a: object, **_k: object) -> None:
        raise AssertionError("a run started")

    monkeypatch.setattr(run_cmd, "run_live", started)
    monkeypatch.setattr(run_cmd, "run_matched", started)
    out = tmp_path / "out"
    res = CliRunner().invoke(app, ["run", "--out", str(out), *args], env={"COLUMNS": "200"})
    assert res.exit_code == 2, res.output
    assert f"Invalid value for {option}" in res.output.replace("'", ""), res.output
    assert shown in res.output
    assert not out.exists()


def test_workflow_families_are_the_paper_families() -> None:
    """The live workflow families are the paper's three, in its order (planfence Sec. 5.1)."""
    from icore.live import FAMILIES, SEEDS_PER_FAMILY

    assert FAMILIES == ("reservation", "fulfillment", "deployment")
    assert tuple(FAMILY_SPECS) == FAMILIES
    assert SEEDS_PER_FAMILY == 10
    with pytest.raises(ValueError, match=r"use one of \('reservation', 'fulfillment'"):
        make_task("nope", 0)


def test_agent_process_import_is_light() -> None:
    """``python -m icore.live._agent_proc`` loads no coordinator, iCORE or audit module.

    The agent process (one per agent, started by :class:`icore.live.LiveTeam`) needs the
    owner services and its host policy only; keeping the rest out keeps team start-up short.
    """
    import subprocess
    import sys

    code = ("import sys, icore.live._agent_proc\n"
            "print(' '.join(sorted(m for m in sys.modules if m.startswith('icore'))))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=60).stdout.split()
    heavy = [m for m in out if m.split(".")[1:2] in (["state"], ["audit"], ["workloads"],
                                                     ["adapters"], ["report"], ["bench"])
             or m in ("icore.live._runner", "icore.live._ledger", "icore.live._run_manifest",
                      "icore.live._matched", "icore.live._process_team")]
    assert "icore.live._agent_proc" in out and heavy == []
    usage = subprocess.run([sys.executable, "-m", "icore.live._agent_proc"],
                           capture_output=True, text=True, timeout=60)
    assert usage.returncode == 2 and "python -m icore.live._agent_proc" in usage.stderr


def test_run_live_unknown_policy_is_a_typed_error(tmp_path: Path) -> None:
    """``run_live(..., policy=...)`` with an unknown policy raises LiveManifestError (path
    ``policy``, listing the nine) before any process starts or any folder is made."""
    from icore.live import run_live

    out = tmp_path / "run"
    with pytest.raises(LiveManifestError) as ei:
        run_live(default_manifest(), out, policy="nope")
    assert ei.value.fields["path"] == "policy"
    assert "planfence" in str(ei.value) and "all_replica" in str(ei.value)
    assert not out.exists()
