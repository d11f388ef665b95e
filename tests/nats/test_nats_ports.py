"""A port taken between picking it and nats-server binding it: the start runs again (#29).

``free_port`` binds port 0 and lets it go; another process can take that port before
nats-server binds it (seen once in CI as a failed cluster start). Here the race is made
certain: the first ports handed out are held by a listening socket of the test, and the
real nats-server is started on them.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from icore.net._team import nats_server
from icore.net.nats import NatsCluster, NatsServerError

from .conftest import AGENTS, TEAM

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def taken() -> Iterator[int]:
    """A port on 127.0.0.1 held by a listening socket for the test's length."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        yield int(s.getsockname()[1])


def _first_taken(monkeypatch: pytest.MonkeyPatch, port: int, times: int) -> list[int]:
    """``free_port`` answers ``port`` ``times`` times, then as before; the answers given."""
    real, given = nats_server.free_port, []

    def pick() -> int:
        given.append(port if len(given) < times else real())
        return given[-1]
    monkeypatch.setattr(nats_server, "free_port", pick)
    return given


def test_a_client_port_taken_meanwhile_starts_on_fresh_ports(
        tmp_path: Path, nats_team_certs: Path, taken: int,
        monkeypatch: pytest.MonkeyPatch) -> None:
    given = _first_taken(monkeypatch, taken, 1)
    with NatsCluster(tmp_path / "n", nats_team_certs, AGENTS, team=TEAM) as cl:
        node = cl.nodes[0]
        assert given[0] == taken and node.port != taken, (given, node)
        assert node.proc is not None and node.proc.poll() is None
        with socket.create_connection(("127.0.0.1", node.port), timeout=5):
            pass  # it serves on the fresh port
    assert len(given) == 4  # two ports per attempt, one retry


def test_a_cluster_route_port_taken_meanwhile_starts_on_fresh_ports(
        tmp_path: Path, nats_team_certs: Path, taken: int,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Node 2's route port (the 6th port picked) is the taken one: all three restart."""
    real = nats_server.free_port
    given: list[int] = []

    def pick() -> int:
        given.append(taken if len(given) == 5 else real())
        return given[-1]
    monkeypatch.setattr(nats_server, "free_port", pick)
    with NatsCluster(tmp_path / "c", nats_team_certs, AGENTS, team=TEAM, nodes=3) as cl:
        assert all(n.proc is not None and n.proc.poll() is None for n in cl.nodes)
        assert taken not in {p for n in cl.nodes for p in (n.port, n.http_port,
                                                             n.cluster_port)}
    assert len(given) == 18  # three ports per node, one retry


def test_a_port_always_taken_fails_after_the_attempts(
        tmp_path: Path, nats_team_certs: Path, taken: int,
        monkeypatch: pytest.MonkeyPatch) -> None:
    _first_taken(monkeypatch, taken, 10**6)
    with pytest.raises(NatsServerError, match="did not become healthy") as err:
        NatsCluster(tmp_path / "n", nats_team_certs, AGENTS, team=TEAM).start()
    assert "address already in use" in str(err.value.fields["log"])
