"""Live teams over NATS JetStream: `icore run` (the matched study) and `icore serve`."""

from __future__ import annotations

import json
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from icore.live import load_manifest, run_matched
from icore.net import TeamManifest, TeamManifestError

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.mark.slow
def test_matched_study_over_nats(tmp_path: Path) -> None:
    """planfence App. A.5 over NATS: the same 30/30 safety counts as over icore's own
    owner services (3 families x 10 seeds x 3 policies; the run starts its own server)."""
    m = load_manifest(EXAMPLES / "live" / "reservation-nats.yaml")
    assert m.memory.backend == "nats"
    res = run_matched(tmp_path / "m", manifest=m, concurrency=10)
    for policy in ("owner_head_freshness", "centralized_lineage", "planfence"):
        row, run = res.row(policy), res.runs[policy]
        assert row.tasks == 30 and row.accepted == row.responses
        assert not run.crashes and not run.error and run.processes_left == ()
        assert run.records_lost == () and run.records_checked > 0
        if policy == "owner_head_freshness":
            assert row.succeeded == 0 and row.invalid == 30
        else:
            assert row.succeeded == 30 and row.invalid == 0 and row.successful_replans == 30
    # the run's engine (its servers' configs live in the run folder) was stopped with it
    assert not [c for c in _child_cmdlines() if "nats-server" in c and str(tmp_path) in c]


def _child_cmdlines() -> list[str]:
    import os
    me = str(os.getpid())
    out = []
    for d in Path("/proc").iterdir():
        try:
            stat = (d / "stat").read_text().rsplit(")", 1)[1].split()
            if stat[1] == me:
                out.append((d / "cmdline").read_bytes().replace(b"\0", b" ").decode())
        except (OSError, IndexError):
            continue
    return out


def test_memory_section_is_validated() -> None:
    """A bad memory section is a manifest error naming the field."""
    base = {"agents": [{"id": "a"}], "ownership": {"x/*": "a"}}
    m = TeamManifest.parse({**base, "memory": {"backend": "nats"}})
    assert m.memory.backend == "nats" and m.memory.servers == ()
    with pytest.raises(TeamManifestError, match=r"memory\.servers"):
        TeamManifest.parse({**base, "memory": {"backend": "nats", "servers": ["h:4222"]}})
    with pytest.raises(TeamManifestError, match=r"memory\.backend"):
        TeamManifest.parse({**base, "memory": {"backend": "etcd"}})
    assert TeamManifest.parse(base).memory.backend == "sqlite"


def test_serve_all_runs_the_team_engine(tmp_path: Path) -> None:
    """`icore serve nats-team.yaml --all` starts a local nats-server, creates the buckets,
    prints a ready line and stops it on SIGTERM; --agent is a usage error on NATS."""
    team = tmp_path / "team.yaml"
    team.write_text((EXAMPLES / "team" / "nats-team.yaml").read_text(encoding="utf-8"),
                    encoding="utf-8")
    cmd = [sys.executable, "-m", "icore", "serve", str(team)]
    bad = subprocess.run([*cmd, "--agent", "planner"], capture_output=True, text=True,
                         timeout=60)
    assert bad.returncode == 2 and "NATS" in bad.stderr
    proc = subprocess.Popen([*cmd, "--all"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    try:
        assert proc.stdout is not None
        deadline, ready = time.monotonic() + 60, None
        while time.monotonic() < deadline and ready is None:
            r, _, _ = select.select([proc.stdout], [], [], 0.5)
            if r:
                line = proc.stdout.readline()
                if not line:
                    break
                msg = json.loads(line)
                if msg.get("event") == "ready":
                    ready = msg
        assert ready is not None and ready["backend"] == "nats" and ready["local"]
        from icore.memory import OwnershipMap
        from icore.net.nats import NatsStore
        from icore.records import Record
        om = OwnershipMap.from_mapping({"req/*": "planner"})
        with NatsStore(ready["servers"], certs_dir=tmp_path / "certs", ownership=om,
                       agent="planner") as s:
            s.commit(Record.create(key="req/1", owner="planner", seq=1, content=1),
                     writer="planner")
            assert s.head_keys() == ["req/1"]
        proc.send_signal(signal.SIGTERM)
        out, _err = proc.communicate(timeout=30)
        assert proc.returncode == 0 and '"stopped"' in out
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
