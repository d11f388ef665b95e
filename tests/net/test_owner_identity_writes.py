"""A process holding an owner's identity writes its facts at ``icore serve`` (#28).

QA qa-new13b S3.

``icore serve team.yaml --agent marketing`` hosts the owner; an app process with
``Workspace.over_tcp(..., identity="marketing")`` used to be refused ("hosted in another
process; it writes the fact there"), though the serving process runs no app code. Its
commits now go to the owner service over mutual TLS, where every owner rule applies;
other identities stay refused. Real ``icore serve`` subprocess, real TLS on 127.0.0.1.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from icore.errors import HeadConflict, RemoteError
from icore.net import init_team_certs
from icore.workspace import Workspace, WorkspaceError

SRC = str(Path(__file__).resolve().parents[2] / "src")
FACTS = {"campaign/*": "marketing"}


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[Path, dict[str, tuple[str, int]]]]:
    """``icore serve team.yaml --all`` (marketing, opsa) in a subprocess; its addresses."""
    (tmp_path / "team.yaml").write_text(
        "version: 1\nteam: content-team\ndata_dir: data\ncerts_dir: certs\nagents:\n"
        "  - {id: marketing, role: owner, host: 127.0.0.1, port: 0}\n"
        "  - {id: opsa, role: owner, host: 127.0.0.1, port: 0}\n"
        "ownership:\n  campaign/*: marketing\n  slot/*: opsa\n")
    init_team_certs(tmp_path / "certs", ["marketing", "opsa"], team="content-team")
    proc = subprocess.Popen([sys.executable, "-m", "icore", "serve",
                             str(tmp_path / "team.yaml"), "--all"],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                            env={**os.environ, "PYTHONPATH": SRC})
    try:
        assert proc.stdout is not None
        ready: dict[str, tuple[str, int]] = {}
        assert select.select([proc.stdout], [], [], 90)[0]
        for _ in range(2):
            msg = json.loads(proc.stdout.readline())
            if msg.get("event") == "ready":
                ready[msg["agent"]] = ("127.0.0.1", msg["port"])
        assert sorted(ready) == ["marketing", "opsa"]
        yield tmp_path / "certs", ready
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.communicate(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.communicate(timeout=10)


def _ws(certs: Path, addrs: dict[str, tuple[str, int]], identity: str) -> Workspace:
    return Workspace.over_tcp({**FACTS, "slot/*": "opsa"}, identity=identity,
                              certs_dir=certs, addresses=addrs)


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_owner_identity_writes_at_icore_serve(served: tuple[Path, dict[str, tuple[str, int]]]
                                              ) -> None:
    """The QA repro made to work: put/update/commit from the owner's identity land at the
    owner service; a second process of the same identity interleaves (the owner sequence
    is the service's); CAS and the other identities are still refused."""
    certs, addrs = served
    with _ws(certs, addrs, "marketing") as mkt, _ws(certs, addrs, "marketing") as mkt2, \
            _ws(certs, addrs, "opsa") as ops:
        first = mkt.put("campaign/spring", {"launch": "2026-12-24", "budget": 500})
        assert ops.value("campaign/spring") == {"launch": "2026-12-24", "budget": 500}
        moved = mkt2.update("campaign/spring", lambda c: {**c, "launch": "2027-01-10"})
        assert moved.seq > first.seq and moved.supersedes == first.id
        again = mkt.update("campaign/spring", lambda c: {**c, "budget": 800})
        assert again.seq > moved.seq
        assert ops.value("campaign/spring") == {"launch": "2027-01-10", "budget": 800}
        assert mkt.put("campaign/spring", {"launch": "2027-01-10", "budget": 800}) == again
        with pytest.raises(HeadConflict):  # the service's compare-and-set
            mkt.commit("campaign/spring", {"x": 1}, expected=first.id)
        with pytest.raises(WorkspaceError, match="only a process holding the owner's "
                           "identity") as ei:
            ops.put("campaign/spring", {"launch": "2030-01-01"})
        assert ei.value.fields["owner"] == "marketing"
        assert ei.value.fields["identity"] == "opsa"
        assert "identity='marketing'" in ei.value.fields["fix"]
        with pytest.raises(WorkspaceError, match="only the fact's owner"):
            mkt.put("campaign/spring", {"x": 1}, by="opsa")
        ops.put("slot/xmas", {"free": True})  # each identity writes its own facts
        with pytest.raises(WorkspaceError, match="only a process holding"):
            mkt.put("slot/xmas", {"free": False})
        assert mkt.value("slot/xmas") == {"free": True}
        assert ops.value("campaign/spring") == {"launch": "2027-01-10", "budget": 800}


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_owner_rules_apply_at_the_service_when_maps_disagree(
        served: tuple[Path, dict[str, tuple[str, int]]]) -> None:
    """A client whose own map gives ``campaign/*`` to opsa commits with opsa's identity
    to opsa's service: the service's map (the manifest) refuses the write, and the
    refusal names both owners (a typed WorkspaceError, no longer a bare RemoteError)."""
    certs, addrs = served
    with Workspace.over_tcp({"campaign/*": "opsa"}, identity="opsa", certs_dir=certs,
                            addresses=addrs) as rogue:
        with pytest.raises(WorkspaceError, match="name different owners") as ei:
            rogue.put("campaign/spring", {"launch": "2030-01-01"})
        assert not isinstance(ei.value, RemoteError)
        f = ei.value.fields
        assert (f["key"], f["pattern"], f["owner"]) == ("campaign/spring", "campaign/*",
                                                        "opsa")
        assert (f["service"], f["service_owner"], f["service_pattern"]) == (
            "opsa", "marketing", "campaign/*")
        # the commit itself (no head read first) is named the same way
        assert rogue.remote_writes is not None
        with pytest.raises(WorkspaceError, match="name different owners") as ei:
            rogue.remote_writes.commit_value("campaign/spring", {"x": 1}, expected=None,
                                             inputs=[], type="fact")
        assert ei.value.fields["service_owner"] == "marketing"


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_reads_of_mis_owned_keys_are_refused_not_empty(
        served: tuple[Path, dict[str, tuple[str, int]]]) -> None:
    """#28 gap: a reader whose map routes ``campaign/*`` to opsa (the manifest: to
    marketing) used to read "never written" for a written fact. Every read path (value,
    head, an agent's read) now refuses it naming the pattern and both owners;
    a key the service's map declares no owner for is named as such; keys both maps
    agree on still read."""
    certs, addrs = served
    with _ws(certs, addrs, "marketing") as mkt:
        mkt.put("campaign/spring", {"launch": "2026-12-24"})
    with _ws(certs, addrs, "opsa") as ops:
        ops.put("slot/xmas", {"free": True})
    wrong = {"campaign/*": "opsa", "slot/*": "opsa", "promo/*": "marketing"}
    with Workspace.over_tcp(wrong, identity="opsa", certs_dir=certs,
                            addresses=addrs) as ws:
        assert ws.value("slot/xmas") == {"free": True}  # agreed: reads as before
        for read in (ws.value, ws.head, ws.agent("planner").read):
            with pytest.raises(WorkspaceError, match="name different owners") as ei:
                read("campaign/spring")
            f = ei.value.fields
            assert (f["pattern"], f["owner"], f["service"]) == ("campaign/*", "opsa",
                                                                "opsa")
            assert (f["service_owner"], f["service_pattern"]) == ("marketing",
                                                                  "campaign/*")
            assert "TeamManifest.ownership_map()" in f["fix"]
        with pytest.raises(WorkspaceError, match="name different owners") as ei:
            ws.value("promo/x", default=None)  # the manifest declares no promo/*
        assert ei.value.fields["owner"] == "marketing"
        assert ei.value.fields["service_owner"] is None


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_concurrent_updates_of_one_identity_lose_nothing(
        served: tuple[Path, dict[str, tuple[str, int]]]) -> None:
    """Four threads over two connections of the owner's identity, each adding 1 ten
    times: the counter ends at exactly +40 (CAS and sequence resends at the service)."""
    certs, addrs = served
    with _ws(certs, addrs, "marketing") as a, _ws(certs, addrs, "marketing") as b:
        a.put("campaign/count", 0)
        errors: list[BaseException] = []

        def work(ws: Workspace) -> None:
            try:
                for _ in range(10):
                    ws.update("campaign/count", lambda n: n + 1, retries=1000)
            except BaseException as exc:  # reported below
                errors.append(exc)

        ts = [threading.Thread(target=work, args=(w,)) for w in (a, b, a, b)]
        for t in ts:
            t.start()
        for t in ts:
            t.join(120)
        assert not errors
        assert a.value("campaign/count") == 40
