"""Real agent processes on 127.0.0.1: manifest, launcher, races, kill -9, CLI."""

from __future__ import annotations

import asyncio
import json
import os
import select
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from icore.cli import app
from icore.fence import Outcome, validate
from icore.memory import MemoryStore, OwnershipMap
from icore.net import (
    OwnerServer,
    ServerThread,
    SyncOwnerClient,
    TeamManifest,
    TeamManifestError,
    TeamProcesses,
    TransportError,
    client_context,
    init_team_certs,
    serve_agent,
    server_context,
)
from icore.records import Record, derive

N_AGENTS = 5


def _write_team(tmp: Path, n: int = N_AGENTS) -> Path:
    agents = [f"a{i}" for i in range(n)]
    lines = ["version: 1", "team: race-team", "data_dir: data", "certs_dir: certs",
             "agents:"]
    lines += [f"  - {{id: {a}, role: owner, host: 127.0.0.1, port: 0}}" for a in agents]
    lines += ["ownership:"] + [f'  "k{i}/*": a{i}' for i in range(n)] + ['  "plan/*": a0']
    path = tmp / "team.yaml"
    path.write_text("\n".join(lines) + "\n")
    init_team_certs(tmp / "certs", [*agents, "executor"], team="race-team")
    return path


class TestManifest:
    """YAML + pydantic; errors name the offending path."""

    def test_load_and_resolve(self, tmp_path: Path) -> None:
        """Paths resolve against the manifest folder; ownership map works."""
        m = TeamManifest.load(_write_team(tmp_path, 2))
        assert m.agent_ids == ["a0", "a1"]
        assert m.certs_dir == tmp_path / "certs"
        assert m.store_path("a1") == tmp_path / "data" / "a1.sqlite"
        assert m.ownership_map().owner_of("k1/x") == "a1"
        assert TeamManifest.parse(json.loads(json.dumps(m.model_dump(mode="json"))))

    @pytest.mark.parametrize(("doc", "where"), [
        ({"agents": []}, "agents"),
        ({"agents": [{"id": "a"}, {"id": "a"}]}, "duplicate"),
        ({"agents": [{"id": "a"}], "ownership": {"x/*": "zed"}}, "zed"),
        ({"agents": [{"id": "a", "port": 70000}]}, "agents.0.port"),
        ({"agents": [{"id": "a b"}]}, "agents.0.id"),
        ({"agents": [{"id": "a"}], "colour": 1}, "colour"),
    ])
    def test_invalid(self, doc: dict[str, object], where: str) -> None:
        """Invalid manifests raise TeamManifestError naming the problem."""
        with pytest.raises(TeamManifestError, match=where):
            TeamManifest.parse(doc)

    @pytest.mark.parametrize("data", [b"\xff\xfe\x00\x81", b"[" * 100_000 + b"]" * 100_000])
    def test_unreadable_file(self, tmp_path: Path, data: bytes) -> None:
        """Non-UTF-8 or absurdly nested YAML is a TeamManifestError naming the file."""
        p = tmp_path / "team.yaml"
        p.write_bytes(data)
        with pytest.raises(TeamManifestError) as ei:
            TeamManifest.load(p)
        assert ei.value.fields["path"] == str(p)


def _revise(client: SyncOwnerClient, owner: str, key: str, prev: Record) -> Record:
    # revisions are lineage roots here, so executors need no ancestry to plan over them;
    # each names the head it replaces (compare-and-set on an explicit expected head)
    rec = Record.create(key=key, owner=owner, seq=prev.seq + 1, content={"v": prev.seq + 1},
                        type="requirement")
    client.commit(owner, rec, expected_head=prev.id)
    return rec


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_five_agents_revisions_race_actions(tmp_path: Path) -> None:
    """5 agent processes; owners revise while executors act: zero stale authorizations."""
    manifest = _write_team(tmp_path)
    certs = tmp_path / "certs"
    om = TeamManifest.load(manifest).ownership_map()
    _race(manifest, certs, om)


def _race(manifest: Path, certs: Path, om: OwnershipMap) -> None:
    with TeamProcesses(manifest) as team:
        addrs = team.addresses()
        assert len(addrs) == N_AGENTS
        # acknowledged revisions per key: list of (record, ack time)
        history: dict[str, list[tuple[Record, float]]] = {}
        writers = {o: SyncOwnerClient(addrs, identity=o, ssl_context=client_context(certs, o))
                   for o in addrs}
        heads: dict[str, Record] = {}
        for i, o in enumerate(addrs):
            key = f"k{i}/req"
            rec = Record.create(key=key, owner=o, seq=1, content={"v": 1}, type="requirement")
            writers[o].commit(o, rec)
            history[key] = [(rec, time.monotonic())]
            heads[key] = rec
        stop = threading.Event()
        lock = threading.Lock()

        def write_loop(i: int, o: str) -> None:
            key = f"k{i}/req"
            for _ in range(400):  # bounded
                if stop.is_set():
                    return
                rec = _revise(writers[o], o, key, heads[key])
                with lock:
                    history[key].append((rec, time.monotonic()))
                    heads[key] = rec
                time.sleep(0.02 + 0.01 * i)

        results: list[tuple[float, dict[str, str]]] = []
        counts = {"authorized": 0, "replans": 0, "blocked": 0}
        reasons: list[str] = []

        def act_loop(ex: int) -> None:
            local = MemoryStore(om, None)
            with SyncOwnerClient(addrs, identity="executor",
                                 ssl_context=client_context(certs, "executor")) as c:
                for n in range(40):  # bounded
                    deps = [f"k{(ex + n) % N_AGENTS}/req", f"k{(ex + n + 2) % N_AGENTS}/req"]
                    inputs = []
                    for key in deps:
                        owner = om.require_owner(key)
                        h = c.query_heads(owner, [key]).heads[key]
                        got = c.fetch(owner, [h.record_id])
                        for r in got:
                            local.install(r)
                        inputs.extend(got)
                    seq = 1 + ex * 1000 + n * 2
                    plan = derive(key=f"plan/{ex}-{n}", owner="a0", seq=seq,
                                  content={"n": n}, inputs=inputs)
                    local.install(plan)
                    time.sleep(0.003)  # let owners race the pending action
                    for replanned in (False, True):
                        t_start = time.monotonic()
                        d = validate(roots=[plan.id], deps=deps, lookup=local.lookup,
                                     ownership=om, owners=c, replanned=replanned)
                        if d.outcome is Outcome.AUTHORIZED:
                            with lock:
                                counts["authorized"] += 1
                                results.append((t_start, dict(d.frontier)))
                            break
                        if d.outcome is Outcome.BLOCKED:
                            with lock:
                                counts["blocked"] += 1
                                reasons.append(f"{d.reason}: {d.detail}")
                            break
                        with lock:
                            counts["replans"] += 1
                        for r in d.fresh.values():
                            local.install(r)
                        plan = derive(key=f"plan/{ex}-{n}", owner="a0", seq=seq + 1,
                                      content={"n": n, "replan": True},
                                      inputs=[d.fresh.get(k) or local.get(d.frontier[k])
                                              for k in deps])
                        local.install(plan)

        wts = [threading.Thread(target=write_loop, args=(i, o)) for i, o in enumerate(addrs)]
        ets = [threading.Thread(target=act_loop, args=(e,)) for e in range(3)]
        for t in wts + ets:
            t.start()
        for t in ets:
            t.join(90)
        stop.set()
        for t in wts:
            t.join(30)
        for w in writers.values():
            w.close()
        assert not any(t.is_alive() for t in wts + ets)

    # an authorized action is stale if a newer revision of a dependency was acknowledged
    # by its owner before the gate sent its queries
    stale = 0
    for t_start, frontier in results:
        for key, rid in frontier.items():
            revs = history[key]
            idx = next(i for i, (r, _) in enumerate(revs) if r.id == rid)
            if idx + 1 < len(revs) and revs[idx + 1][1] < t_start:
                stale += 1
    assert stale == 0
    assert counts["authorized"] > 0, (counts, reasons[:5])
    assert counts["replans"] > 0, counts  # the race really happened
    assert sum(counts.values()) >= 120


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_kill9_durability(tmp_path: Path) -> None:
    """kill -9 an owner during a write loop: every acknowledged write survives."""
    manifest = _write_team(tmp_path, 1)
    certs = tmp_path / "certs"
    acked: list[Record] = []
    with TeamProcesses(manifest) as team:
        addrs = team.addresses()
        prev = Record.create(key="k0/req", owner="a0", seq=1, content={"v": 1})
        done = threading.Event()

        def write_loop() -> None:
            nonlocal prev
            with SyncOwnerClient(addrs, identity="a0",
                                 ssl_context=client_context(certs, "a0")) as w:
                rec = prev
                for _ in range(5000):  # bounded
                    try:
                        w.commit("a0", rec, timeout_s=1.0)
                    except TransportError:
                        break
                    acked.append(rec)
                    rec = Record.create(key="k0/req", owner="a0", seq=rec.seq + 1,
                                        content={"v": rec.seq + 1, "pad": "x" * 200},
                                        parents=[rec.id])
            done.set()

        t = threading.Thread(target=write_loop)
        t.start()
        for _ in range(1000):  # bounded wait for some acknowledged writes
            if len(acked) >= 40:
                break
            time.sleep(0.01)
        os.kill(team.procs["a0"].proc.pid, signal.SIGKILL)
        team.kill("a0")
        assert done.wait(30)
        t.join(10)
        n_acked = len(acked)
        assert n_acked >= 40
        team.restart("a0")
        with SyncOwnerClient(team.addresses(), identity="executor",
                             ssl_context=client_context(certs, "executor")) as c:
            head = c.query_heads("a0", ["k0/req"]).heads["k0/req"]
            assert head.seq >= acked[-1].seq  # at most one unacknowledged write applied
            got = c.fetch("a0", [r.id for r in acked])
            assert [r.id for r in got] == [r.id for r in acked]
            top = c.fetch("a0", [head.record_id])[0]
            assert top.seq == head.seq
            assert top.id == acked[-1].id or top.parents == (acked[-1].id,)


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_cli_certs_and_team_launcher(tmp_path: Path) -> None:
    """`icore certs init` then `icore serve --all`: ready lines, clean stop on SIGTERM."""
    manifest = _write_team(tmp_path, 3)
    res = CliRunner().invoke(app, ["certs", "init", "--manifest", str(manifest)])
    assert res.exit_code == 0, res.output
    assert (tmp_path / "certs" / "a2.crt").is_file()
    proc = subprocess.Popen([sys.executable, "-m", "icore", "serve", str(manifest), "--all"],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        assert proc.stdout is not None
        ready: dict[str, int] = {}
        # the launcher prints its ready lines only once every agent is up; readline then
        # returns them (EOF if it died; the per-test timeout bounds the wait)
        assert select.select([proc.stdout], [], [], 90)[0]
        for _ in range(3):
            line = proc.stdout.readline()
            if not line:
                break
            msg = json.loads(line)
            if msg.get("event") == "ready":
                ready[msg["agent"]] = msg["port"]
        assert sorted(ready) == ["a0", "a1", "a2"]
        addrs = {a: ("127.0.0.1", p) for a, p in ready.items()}
        with SyncOwnerClient(addrs, identity="executor",
                             ssl_context=client_context(tmp_path / "certs", "executor")) as c:
            assert [c.ping(a) for a in sorted(addrs)] == ["a0", "a1", "a2"]
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=30)
        stopped = json.loads(out.strip().splitlines()[-1])
        assert stopped == {"event": "stopped", "exit_codes": {"a0": 0, "a1": 0, "a2": 0}}
        assert proc.returncode == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)


def test_cli_certs_into_unusable_folder_is_a_clean_error(tmp_path: Path) -> None:
    """`icore certs init --dir` under a file: a usage error naming --dir and the file
    (exit 2, before anything is written), no traceback."""
    (tmp_path / "afile").write_text("")
    res = CliRunner().invoke(app, ["certs", "init", "--dir", str(tmp_path / "afile" / "c"),
                                   "--agent", "a"])
    assert res.exit_code == 2
    assert isinstance(res.exception, SystemExit)
    assert "error: --dir" in res.output and "afile is a file, not a folder" in res.output


def test_cli_serve_bad_log_level_is_a_usage_error(tmp_path: Path) -> None:
    """An unknown --log-level is a usage error (exit 2), not a ValueError traceback."""
    manifest = _write_team(tmp_path, 1)
    res = CliRunner().invoke(app, ["serve", str(manifest), "--all", "--log-level", "bogus"],
                             terminal_width=200)
    assert res.exit_code == 2
    assert isinstance(res.exception, SystemExit)
    assert "--log-level" in res.output


def test_cli_certs_with_corrupt_ca_names_the_folder(tmp_path: Path) -> None:
    """A damaged existing CA: a usage error naming the certs folder, nothing replaced."""
    certs = tmp_path / "certs"
    init_team_certs(certs, ["a"])
    (certs / "ca.crt").write_text("junk")
    res = CliRunner().invoke(app, ["certs", "init", "--dir", str(certs), "--agent", "b"])
    assert res.exit_code == 2
    assert "cannot load the team CA" in res.output and str(certs) in res.output
    assert not (certs / "b.crt").exists()


@pytest.mark.timeout(30)
@pytest.mark.parametrize("args", [["serve", "{m}", "--all"], ["serve", "{m}", "--agent", "a0"],
                                  ["certs", "init", "--manifest", "{m}"]])
def test_cli_refuses_a_fifo_manifest(tmp_path: Path, args: list[str]) -> None:
    """A team manifest that is a named pipe would block the load: ``error:`` naming it,
    exit 2, nothing started or certified."""
    fifo = tmp_path / "team.yaml"
    os.mkfifo(fifo)
    res = CliRunner().invoke(app, [a.format(m=fifo) for a in args], env={"COLUMNS": "200"})
    assert res.exit_code == 2, res.output
    assert "error:" in res.output and str(fifo) in res.output and "FIFO" in res.output
    assert not (tmp_path / "certs").exists()


@pytest.mark.parametrize("port", ["-1", "65536", "100000"])
def test_cli_serve_port_out_of_range_is_a_usage_error(tmp_path: Path, port: str) -> None:
    """``--port`` is a TCP port, 0..65535 (0 = ephemeral): anything else exits 2 naming
    the option, before the store is opened or a socket bound."""
    manifest = _write_team(tmp_path, 1)
    res = CliRunner().invoke(app, ["serve", str(manifest), "--agent", "a0", "--port", port],
                             env={"COLUMNS": "200"})
    assert res.exit_code == 2, res.output
    assert "'--port'" in res.output and "or equal to" in res.output
    assert not (tmp_path / "data").exists()


@pytest.mark.parametrize("port", ["0", "65535"])
def test_cli_serve_port_bounds_are_accepted(tmp_path: Path, port: str) -> None:
    """0 (ephemeral) and 65535 pass the option check: the command goes on to look up
    the agent (unknown here: exit 2 naming it and the manifest's agents, as a bad
    manifest; not an error about --port; QA qa-new13b: it was exit 1)."""
    manifest = _write_team(tmp_path, 1)
    res = CliRunner().invoke(app, ["serve", str(manifest), "--agent", "nosuch", "--port",
                                   port], env={"COLUMNS": "200"})
    assert res.exit_code == 2, res.output
    assert "'nosuch' is not an agent" in res.output and "--port" not in res.output
    assert "its agents: a0" in res.output
    assert not (tmp_path / "data").exists()


@pytest.mark.timeout(30)
def test_cli_certs_with_a_fifo_ca_key_is_refused(tmp_path: Path) -> None:
    """An existing CA whose key is a named pipe would block the load: a usage error
    naming it, nothing certified."""
    certs = tmp_path / "certs"
    init_team_certs(certs, ["a"])
    (certs / "ca.key").unlink()
    os.mkfifo(certs / "ca.key")
    res = CliRunner().invoke(app, ["certs", "init", "--dir", str(certs), "--agent", "b"],
                             env={"COLUMNS": "200"})
    assert res.exit_code == 2, res.output
    assert str(certs / "ca.key") in res.output and "FIFO" in res.output
    assert not (certs / "b.crt").exists()


def test_cli_serve_port_with_all_is_a_usage_error(tmp_path: Path) -> None:
    """``--port`` overrides one agent's port; with ``--all`` it used to be silently
    ignored. Now: exit 2 naming both options, no agent started."""
    manifest = _write_team(tmp_path, 1)
    res = CliRunner().invoke(app, ["serve", str(manifest), "--all", "--port", "7400"],
                             env={"COLUMNS": "200"})
    assert res.exit_code == 2, res.output
    assert "error:" in res.output and "--port" in res.output and "--all" in res.output
    assert not (tmp_path / "data").exists()


BAD_PORTS: list[object] = [-1, 65536, 10**9, "7401", 7401.0, True, None]


@pytest.mark.timeout(30)
@pytest.mark.parametrize("port", BAD_PORTS[:-1])
def test_serve_agent_refuses_a_bad_port(tmp_path: Path, port: object) -> None:
    """The library refuses a non-int or out-of-range port with ValueError, before the
    store is opened or a socket bound."""
    m = TeamManifest.load(_write_team(tmp_path, 1))
    with pytest.raises(ValueError, match="port"):
        asyncio.run(serve_agent(m, "a0", port=port))  # type: ignore[arg-type]
    assert not (tmp_path / "data").exists()


@pytest.mark.parametrize("port", BAD_PORTS)
def test_owner_server_refuses_a_bad_port(tmp_path: Path, port: object) -> None:
    """``OwnerServer`` and ``ServerThread`` check the port at construction."""
    certs = tmp_path / "certs"
    init_team_certs(certs, ["a"])
    ctx = server_context(certs, "a")
    store = MemoryStore(OwnershipMap.from_mapping({"k/*": "a"}), "a")
    with pytest.raises(ValueError, match="port"):
        OwnerServer(store, agent="a", ssl_context=ctx, port=port)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="port"):
        ServerThread(store, agent="a", ssl_context=ctx, port=port)  # type: ignore[arg-type]


def test_a_bad_agent_id_names_its_field_once(tmp_path: Path) -> None:
    """Review (#29): ``init_team_certs`` re-wrapped the id check's error, so the message
    read ``(field='agent') (field='agents')``."""
    from icore.errors import TeamManifestError
    from icore.net import init_team_certs

    with pytest.raises(TeamManifestError) as e:
        init_team_certs(tmp_path / "certs", ["bad id"], team="t")
    assert str(e.value).count("field=") == 1 and e.value.fields["field"] == "agents"
    assert not (tmp_path / "certs").exists()
