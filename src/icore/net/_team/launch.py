"""Serving one agent from a manifest, and launching a team of agent processes.

:func:`serve_agent` is what ``icore serve MANIFEST --agent ID`` runs: it opens the
agent's durable SQLite store, serves it over mutual TLS and prints one JSON *ready* line
on stdout (``{"event": "ready", "agent": ..., "host": ..., "port": ..., "pid": ...}``);
SIGTERM or SIGINT closes the server and the store cleanly.

:class:`TeamProcesses` starts one such process per agent on 127.0.0.1, waits for every
ready line (bounded), exposes the bound addresses, and stops them with SIGTERM (SIGKILL
after a grace period). Agent stderr goes to ``<data_dir>/logs/<agent>.log``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from icore._extras import run_async
from icore.errors import IcoreError, redact
from icore.memory import SQLiteStore
from icore.net._errors import TransportError
from icore.net._tcp.server import OwnerServer, check_port
from icore.net._team.manifest import TeamManifest
from icore.net._team.pki import server_context

READY_TIMEOUT_S = 60.0
"""How long the launcher waits for an agent's ready line."""
STOP_GRACE_S = 5.0
"""How long the launcher waits after SIGTERM before SIGKILL."""
LOOPBACK = ("127.0.0.1", "localhost", "::1")


async def serve_agent(manifest: TeamManifest, agent_id: str, *, port: int | None = None,
                      ready_stream: IO[str] | None = None) -> None:
    """Serve one agent's store until SIGTERM/SIGINT (or cancellation).

    Args:
        manifest: the team manifest.
        agent_id: which agent to serve.
        port: override the manifest's port, an ``int`` in 0..65535 (0 = ephemeral).
        ready_stream: where to write the ready line (default stdout).

    Raises:
        ValueError: ``port`` is given but is not an ``int`` in 0..65535; raised before
            the store is opened or a socket bound.
        TeamManifestError: ``agent_id`` is not in the manifest.
    """
    if port is not None:
        check_port(port)
    spec = manifest.agent(agent_id)
    # the owner service is its file's only user: heads are served from memory (issue 17)
    store = SQLiteStore(manifest.store_path(agent_id), manifest.ownership_map(), agent_id,
                        synchronous=manifest.synchronous, exclusive=True)
    server = OwnerServer(store, agent=agent_id,
                         ssl_context=server_context(manifest.certs_dir, agent_id),
                         host=spec.host, port=spec.port if port is None else port)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, stop.set)
    try:
        bound = await server.start()
        out = ready_stream if ready_stream is not None else sys.stdout
        out.write(json.dumps({"event": "ready", "agent": agent_id, "host": spec.host,
                              "port": bound, "pid": os.getpid()}) + "\n")
        out.flush()
        await stop.wait()
    finally:
        await server.close()
        store.close()


@dataclass
class TeamAgentProcess:
    """One launched agent process.

    Attributes:
        agent: agent id.
        proc: the process.
        host: bound host.
        port: bound port.
        log_path: its stderr log.
    """

    agent: str
    proc: subprocess.Popen[str]
    host: str
    port: int
    log_path: Path


class TeamProcesses:
    """Start and stop one ``icore serve`` process per agent, on 127.0.0.1.

    Args:
        manifest_path: the team manifest (its hosts must be loopback).
        agents: which agents to start (default: all).
        python: interpreter to run ``-m icore`` with.
        env: extra environment variables for the children.

    Use as a context manager; :meth:`kill` and :meth:`restart` support crash tests.
    """

    def __init__(self, manifest_path: str | os.PathLike[str],
                 agents: Sequence[str] | None = None, *, python: str = sys.executable,
                 env: dict[str, str] | None = None) -> None:
        self.manifest_path = Path(manifest_path)
        self.manifest = TeamManifest.load(self.manifest_path)
        for a in self.manifest.agents:
            if a.host not in LOOPBACK:
                raise TransportError("the team launcher only starts agents on 127.0.0.1",
                                     agent=a.id, host=a.host)
        self.agent_ids = list(agents) if agents is not None else self.manifest.agent_ids
        self.python = python
        self.env = {**os.environ, **(env or {})}
        self.procs: dict[str, TeamAgentProcess] = {}
        self._last_port: dict[str, int] = {}

    def start(self) -> TeamProcesses:
        """Start every agent and wait for its ready line.

        Raises:
            TransportError: an agent exited or did not report ready in time (every
                started agent is stopped first).
        """
        try:
            spawned = [(a, *self._spawn(a)) for a in self.agent_ids]  # start in parallel
            for a, proc, log_path in spawned:
                self._register(a, proc, log_path)
        except BaseException:
            for _a, proc, _l in locals().get("spawned", []):
                with contextlib.suppress(Exception):
                    proc.kill()
                    proc.wait(5)
                if proc.stdout is not None:
                    proc.stdout.close()
            self.stop()
            raise
        return self

    def _start_one(self, agent: str, port: int | None = None) -> TeamAgentProcess:
        proc, log_path = self._spawn(agent, port)
        return self._register(agent, proc, log_path)

    def _spawn(self, agent: str, port: int | None = None
               ) -> tuple[subprocess.Popen[str], Path]:
        logs = self.manifest.data_dir / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        log_path = logs / f"{agent}.log"
        # same as `icore serve MANIFEST --agent ID`, without importing the whole CLI
        cmd = [self.python, "-m", "icore.net._team", str(self.manifest_path), "--agent", agent]
        if port is not None:
            cmd += ["--port", str(port)]
        with log_path.open("a", encoding="utf-8") as errf:
            proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=errf,
                                    stdin=subprocess.DEVNULL, text=True, env=self.env)
        return proc, log_path

    def _register(self, agent: str, proc: subprocess.Popen[str], log_path: Path
                  ) -> TeamAgentProcess:
        ready = self._await_ready(proc, agent, log_path)
        ap = TeamAgentProcess(agent, proc, str(ready["host"]), int(ready["port"]), log_path)
        self.procs[agent] = ap
        self._last_port[agent] = ap.port
        return ap

    @staticmethod
    def _await_ready(proc: subprocess.Popen[str], agent: str, log_path: Path
                     ) -> dict[str, Any]:
        assert proc.stdout is not None
        deadline = time.monotonic() + READY_TIMEOUT_S
        while time.monotonic() < deadline:
            r, _, _ = select.select([proc.stdout], [], [], 0.2)
            if r:
                line = proc.stdout.readline()
                if not line:
                    break
                with contextlib.suppress(ValueError):
                    msg = json.loads(line)
                    if isinstance(msg, dict) and msg.get("event") == "ready":
                        return msg
            elif proc.poll() is not None:
                break
        with contextlib.suppress(Exception):
            proc.kill()
            proc.wait(5)
        proc.stdout.close()
        raise TransportError(f"agent {agent} did not become ready: "
                             f"{_last_error(log_path)} (its log: {log_path})", agent=agent,
                             returncode=proc.poll())

    def addresses(self) -> dict[str, tuple[str, int]]:
        """Return agent id -> bound (host, port) of the running agents."""
        return {a: (p.host, p.port) for a, p in self.procs.items()}

    def kill(self, agent: str) -> None:
        """SIGKILL one agent (crash simulation) and reap it."""
        ap = self.procs.pop(agent)
        ap.proc.kill()
        ap.proc.wait(10)
        if ap.proc.stdout is not None:
            ap.proc.stdout.close()

    def restart(self, agent: str, *, same_port: bool = True) -> TeamAgentProcess:
        """Start a (killed or stopped) agent again, on its previous port by default."""
        old = self.procs.pop(agent, None)
        if old is not None:
            self._stop_one(old)
        port = self._last_port.get(agent) if same_port else None
        return self._start_one(agent, port)

    @staticmethod
    def _stop_one(ap: TeamAgentProcess) -> int:
        if ap.proc.poll() is None:
            ap.proc.send_signal(signal.SIGTERM)
            try:
                ap.proc.wait(STOP_GRACE_S)
            except subprocess.TimeoutExpired:
                ap.proc.kill()
                ap.proc.wait(10)
        if ap.proc.stdout is not None:
            ap.proc.stdout.close()
        return int(ap.proc.returncode)

    def stop(self) -> dict[str, int]:
        """Stop every agent (SIGTERM, then SIGKILL after a grace period); return exit codes."""
        codes = {}
        for a, ap in list(self.procs.items()):
            codes[a] = self._stop_one(ap)
            del self.procs[a]
        return codes

    def __enter__(self) -> TeamProcesses:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _last_error(log_path: Path) -> str:
    """The reason an agent process gave: its last ``error:`` line, else its last line."""
    try:
        lines = [ln.strip() for ln in log_path.read_text(
            encoding="utf-8", errors="replace")[-20_000:].splitlines() if ln.strip()]
    except OSError:
        return "no log"
    errs = [ln.removeprefix("error: ") for ln in lines if ln.startswith("error: ")]
    return (errs or lines or ["exited without a message"])[-1][:500]


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``python -m icore.net._team MANIFEST --agent ID [--port P]``.

    The launcher uses it instead of ``icore serve`` to skip importing the CLI; both run
    :func:`serve_agent` the same way. A typed error or an OS error ends it with one
    ``error: ...`` line on stderr and exit 1 (no traceback), which the launcher quotes.
    """
    import argparse
    import logging

    ap = argparse.ArgumentParser(prog="python -m icore.net._team")
    ap.add_argument("manifest")
    ap.add_argument("--agent", required=True)
    ap.add_argument("--port", type=int, default=None)
    ap.add_argument("--log-level", default="INFO")
    ns = ap.parse_args(argv)
    logging.basicConfig(level=ns.log_level.upper(),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        manifest = TeamManifest.load(ns.manifest)
        run_async(serve_agent(manifest, ns.agent, port=ns.port))
    except (IcoreError, OSError, ValueError) as exc:
        print(f"error: {redact(str(exc))}", file=sys.stderr, flush=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
