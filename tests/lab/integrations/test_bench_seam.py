"""``icore bench integrations`` runs and prints every case (no timing assertions)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from icore.cli import app
from icore.integrations.cost import FRAMEWORKS, seam_cases
from icore_lab.bench import BadOption
from icore_lab.bench.micro import SeamWorld, fence_cases, run_seam_bench

WIDE = {"COLUMNS": "200"}
INSTALLED = {"LangGraph tool.invoke": "langchain_core",
             "LangGraph tool.invoke, workspace agent": "langchain_core",
             "OpenAI Agents function tool": "agents", "AG2 tool": "ag2"}


@pytest.mark.timeout(120)
def test_command_runs_every_case(tmp_path: Path) -> None:
    """A short run: every framework installed here and the bare fence get a row with a
    ratio; the targets are named; the JSON has the same rows."""
    js = tmp_path / "seam.json"
    res = CliRunner().invoke(app, ["bench", "integrations", "--calls", "20", "--rounds",
                                   "2", "--json", str(js)], env=WIDE)
    assert res.exit_code == 0, res.output
    doc = json.loads(js.read_text(encoding="utf-8"))
    names = [c["name"] for c in doc["cases"]]
    assert {"LangGraph tool.invoke", "OpenAI Agents function tool",
            "Fence.aexecute (in-process owners)", "bare fence: Fence.execute"} <= set(names)
    assert all(c["base_us"] > 0 and c["fenced_us"] > 0 and c["ratio"] > 0
               for c in doc["cases"])
    targets = {c["name"]: c["target"] for c in doc["cases"]}
    assert targets["LangGraph tool.invoke"] == 1.3
    assert targets["Fence.aexecute (in-process owners)"] == 1.5
    for name in names:
        assert name.split(":")[0].split(" ")[0] in res.output
    assert "1.3x" in res.output and "1.5x" in res.output
    skipped = {s["name"] for s in doc["skipped"]}
    every = {name for name, _ in FRAMEWORKS}
    assert skipped | set(names) >= every
    for name, module in INSTALLED.items():  # an installed framework is measured
        if importlib.util.find_spec(module) is not None:
            assert name in names, doc["skipped"]


def test_every_fenced_call_is_authorized_and_runs_the_tool() -> None:
    """The benchmark measures authorized calls: each fenced call ships once."""
    cases, _ = seam_cases(SeamWorld)
    w = SeamWorld()
    run_seam_bench(fence_cases(w), calls=4, rounds=2)
    # warm-up (4 per side) + 2 rounds x 2 calls per side, on 4 sides that ship
    assert w.shipped == 4 * (4 + 4)
    assert len(cases) >= 1


@pytest.mark.timeout(120)
def test_every_framework_case_runs_the_tool_on_both_sides() -> None:
    """Each framework case (AG2 1.x included) calls the tool once per call on each side:
    no fenced call is blocked, none is skipped silently."""
    worlds: list[SeamWorld] = []

    def world() -> SeamWorld:
        worlds.append(SeamWorld())
        return worlds[-1]

    cases, skipped = seam_cases(world)
    by_name = dict(zip([name for name, _ in FRAMEWORKS], worlds, strict=True))
    assert {c.name for c in cases} | {n for n, _ in skipped} == set(by_name)
    for case in cases:
        run_seam_bench([case], calls=4, rounds=2)
        # warm-up (4 per side) + 2 rounds x 2 calls, on both sides
        assert by_name[case.name].shipped == 2 * (4 + 4), case.name


@pytest.mark.timeout(30)
def test_bad_counts_are_refused() -> None:
    """Fewer calls than rounds, or no rounds: a typed error / exit 2 before measuring."""
    with pytest.raises(BadOption):
        run_seam_bench(fence_cases(), calls=1, rounds=3)
    with pytest.raises(BadOption):
        run_seam_bench(fence_cases(), calls=10, rounds=0)
    res = CliRunner().invoke(app, ["bench", "integrations", "--calls", "2", "--rounds", "5"],
                             env=WIDE)
    assert res.exit_code == 2 and "--rounds" in res.output
