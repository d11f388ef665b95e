"""``icore bench peers``: icore side by side with the peers installed here (issue 17)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from icore.cli import app
from icore_lab.bench import BadOption
from icore_lab.bench.micro._peers import PEERS, peer_availability, run_peers

pytestmark = pytest.mark.timeout(240)


def test_unknown_peer_is_refused_before_anything_starts() -> None:
    with pytest.raises(BadOption, match="unknown peer 'mysql'"):
        run_peers(["mysql"])


def test_bad_rounds_refused() -> None:
    with pytest.raises(BadOption):
        run_peers(rounds=0)


@pytest.mark.slow
def test_side_by_side_run_reports_every_system(tmp_path: Path) -> None:
    out = tmp_path / "peers.json"
    r = CliRunner().invoke(app, ["bench", "peers", "--quick", "--json", str(out)],
                           terminal_width=200)
    assert r.exit_code == 0, r.output
    doc = json.loads(out.read_text())
    by_name = {s["system"]: s for s in doc["systems"]}
    gate = by_name["icore gate"]
    assert gate["p50_ms"]["1"] > 0 and gate["p50_ms"]["8"] > 0
    assert gate["per_s_8"] > 0 and gate["bytes_per_validation"]["8"] > gate[
        "bytes_per_validation"]["1"] > 0
    assert gate["commits_fsync_per_s"] > 0 and gate["commits_nofsync_per_s"] > 0
    assert by_name["icore query_heads"]["per_s_8"] > 0
    avail = peer_availability()
    for peer in PEERS:
        if avail[peer] is None:   # installed here: it ran and measured something
            assert peer not in doc["skipped"]
            assert any(s["system"].startswith(peer) and s["per_s_8"] > 0
                       for s in doc["systems"]), peer
        else:                     # not installed: said so, with the reason
            assert doc["skipped"][peer] == avail[peer]
            assert "not started" in r.output
    assert "icore vs peers" in r.output


def test_writer_keys_are_never_reused_across_rounds() -> None:
    """A later round's writer connection got a freed one's ``id()`` and so its key, which
    already had a head in the shared store: its first commit was refused as a head
    conflict and the bench stopped (seen in ``icore bench peers --peer redis``)."""
    from icore_lab.bench.micro._peers_icore import _IcoreConn

    keys = set()
    for _ in range(50):
        conn = _IcoreConn(None, None, 0)  # type: ignore[arg-type]
        keys.add(conn.key)
        del conn
    assert len(keys) == 50
