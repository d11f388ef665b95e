"""The live team: one OS process per agent on 127.0.0.1, started, routed and stopped.

:class:`LiveTeam` creates the team PKI (one certificate per agent, mutual TLS), writes
each agent's config, starts ``python -m icore.live._agent_proc`` per agent (each with
its own SQLite memory and owner service), tells every agent the owners' addresses, routes
agent-to-agent calls (the one replan) and stops every process: a ``shutdown`` message
first, then SIGTERM, then SIGKILL, each bounded. A process that exits unexpectedly is
recorded as a crash (exit code and the tail of its log) and every request pending on it
fails at once, so the actions depending on it fail closed.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from icore.fence import strategy
from icore.live._errors import AgentCrashed, AgentStepError, LiveRunError, StepTimeout
from icore.live._messages import Command, PeerCall, PeerReply, Ready, Reply, dumps, parse_line
from icore.live._replies import PeersReply
from icore.live._run_manifest import RunManifest
from icore.net import init_team_certs

CENTRAL = "central"
"""Agent id of the centralized-lineage memory service."""

_LINE_LIMIT = 32 * 1024 * 1024

AGENT_MODULE = "icore.live._agent_proc"
"""The agent process entry (``python -m icore.live._agent_proc CONFIG.json``)."""


@dataclass
class _Agent:
    id: str
    role: str
    proc: asyncio.subprocess.Process
    log_path: Path
    db_path: Path
    port: int = 0
    pending: dict[int, asyncio.Future[Reply]] = field(default_factory=dict)
    ready: asyncio.Future[Ready] | None = None
    reader: asyncio.Task[None] | None = None
    crashed: dict[str, Any] | None = None
    stopping: bool = False
    killed: bool = False
    """Set before an injected SIGKILL, so whichever of the reader and ``kill`` records
    the crash first records it as injected."""
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)


def _tail(path: Path, lines: int = 12) -> str:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


class LiveTeam:
    """The processes of one live team.

    Args:
        manifest: the run manifest.
        out_dir: run folder (certs, per-agent databases, configs, logs).
        policy: policy under test (``centralized_lineage`` adds the central service).
        backend: resolved backend config for the agents.
    """

    def __init__(self, manifest: RunManifest, out_dir: Path, *, policy: str,
                 backend: Mapping[str, Any]) -> None:
        self.manifest = manifest
        self.out = out_dir
        self.policy = policy
        self.backend = dict(backend)
        self.agents: dict[str, _Agent] = {}
        self.crashes: list[dict[str, Any]] = []
        self.roles: dict[str, str] = {a.role: a.id for a in manifest.agents}
        self._n = 0
        self._closing = False
        self._routes: set[asyncio.Task[None]] = set()
        self.nats = manifest.memory.backend == "nats"
        self.engine: Any = None
        """The run's :class:`icore.net.nats.TeamEngine` when memory is on NATS."""

    # -- start ----------------------------------------------------------------------
    def _specs(self) -> list[tuple[str, str]]:
        specs: list[tuple[str, str]] = [(a.id, a.role) for a in self.manifest.agents]
        if strategy(self.policy).central and not self.nats:
            # on NATS the engine itself is the one shared service every commit goes through
            specs.append((CENTRAL, "central"))
        return specs

    async def start(self) -> None:
        """Create certificates, start every process, wait for ready, exchange addresses.

        Raises:
            LiveRunError: an agent did not start within ``timeouts.start_s``, or answered
                ``peers`` with an error or a malformed reply (``ReplyFormatError``).
        """
        specs = self._specs()
        team = self.manifest.team_manifest(self.out, policy=self.policy)
        (self.out / "team.yaml").write_text(team.to_yaml(), encoding="utf-8")
        certs = team.certs_dir
        await asyncio.to_thread(init_team_certs, certs, [s[0] for s in specs], team=team.team)
        memory: dict[str, Any] = {"backend": "sqlite"}
        if self.nats:
            memory = await asyncio.to_thread(self._start_engine, certs, specs, team.team)
        team.data_dir.mkdir(parents=True, exist_ok=True)
        (self.out / "agents").mkdir(parents=True, exist_ok=True)
        (self.out / "logs").mkdir(parents=True, exist_ok=True)
        env = dict(os.environ)
        env["PYTHONUNBUFFERED"] = "1"
        for aid, role in specs:
            cfg = {
                "agent": aid, "role": role, "family": self.manifest.family,
                "policy": self.policy, "certs": str(certs),
                "db": str(team.store_path(aid)), "synchronous": team.synchronous,
                "ownership": self.manifest.ownership, "roles": self.roles,
                "backend": self.backend, "tools": [t.model_dump() for t in self.manifest.tools],
                "memory": memory,
                "rpc_s": self.manifest.timeouts.rpc_s, "step_s": self.manifest.timeouts.step_s,
                "transcript": str(self.out / "agents" / f"{aid}.llm.jsonl")
                if self.backend.get("kind") == "llm" else None,
            }
            cfg_path = self.out / "agents" / f"{aid}.json"
            cfg_path.write_text(json.dumps(cfg, indent=1, sort_keys=True), encoding="utf-8")
            log_path = self.out / "logs" / f"{aid}.log"
            with open(log_path, "wb") as err:
                proc = await asyncio.create_subprocess_exec(
                    sys.executable, "-m", AGENT_MODULE, str(cfg_path),
                    stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
                    stderr=err, env=env, limit=_LINE_LIMIT, start_new_session=True)
            a = _Agent(aid, role, proc, log_path, team.store_path(aid))
            a.ready = asyncio.get_running_loop().create_future()
            a.reader = asyncio.create_task(self._read(a))
            self.agents[aid] = a
        try:
            for a in self.agents.values():
                assert a.ready is not None
                ready = await asyncio.wait_for(asyncio.shield(a.ready),
                                               self.manifest.timeouts.start_s)
                a.port = ready.ready
        except (TimeoutError, AgentCrashed) as exc:
            raise LiveRunError(f"agents did not start: {exc}",
                               crashes=[c["agent"] for c in self.crashes]) from exc
        addrs = {a.id: ["127.0.0.1", a.port] for a in self.agents.values()}
        ids = list(self.agents)
        answers = await asyncio.gather(*(self.request(aid, "peers", addresses=addrs)
                                         for aid in ids))
        for aid, res in zip(ids, answers, strict=True):
            PeersReply.from_dict(res, where=f"peers[{aid}]")  # a bad answer fails the start

    def _start_engine(self, certs: Path, specs: list[tuple[str, str]], team: str
                      ) -> dict[str, Any]:
        from icore.net.nats import TeamEngine

        spec = self.manifest.memory
        self.engine = TeamEngine(spec, folder=self.out / "nats", certs_dir=certs,
                                 agents=[s[0] for s in specs], team=team)
        urls = self.engine.start()
        return {"backend": "nats", "servers": urls, "prefix": spec.prefix}

    def stop_engine(self) -> None:
        """Stop the local NATS servers this run started (after its records were checked)."""
        if self.engine is not None:
            self.engine.stop()
            self.engine = None

    # -- control plane --------------------------------------------------------------
    async def _read(self, a: _Agent) -> None:
        assert a.proc.stdout is not None
        try:
            while True:
                line = await a.proc.stdout.readline()
                if not line:
                    break
                try:
                    msg = parse_line(line, to_agent=False)
                except ValueError:
                    continue
                if isinstance(msg, Ready):
                    if a.ready is not None and not a.ready.done():
                        a.ready.set_result(msg)
                elif isinstance(msg, PeerCall):
                    t = asyncio.create_task(self._route(a, msg))
                    self._routes.add(t)
                    t.add_done_callback(self._routes.discard)
                elif isinstance(msg, Reply):
                    fut = a.pending.pop(int(msg.id), None) if msg.id is not None else None
                    if fut is not None and not fut.done():
                        fut.set_result(msg)
        except Exception:  # a broken pipe ends the reader like EOF
            pass
        rc: int | None = None
        with contextlib.suppress(Exception):
            rc = await asyncio.wait_for(a.proc.wait(), 5.0)
        if not a.stopping and not self._closing:
            self._crashed(a, rc, injected=a.killed)
        err = AgentCrashed("agent process exited", agent=a.id, returncode=rc)
        if a.ready is not None and not a.ready.done():
            a.ready.set_exception(err)
            a.ready.exception()  # mark retrieved
        for fut in a.pending.values():
            if not fut.done():
                fut.set_exception(err)
        a.pending.clear()

    def _crashed(self, a: _Agent, rc: int | None, *, injected: bool = False) -> None:
        if a.crashed is not None:
            return
        a.crashed = {"agent": a.id, "role": a.role, "returncode": rc, "injected": injected,
                     "at": time.time(), "log": str(a.log_path), "tail": _tail(a.log_path)}
        self.crashes.append(a.crashed)

    async def _send(self, a: _Agent, msg: Command | PeerReply) -> None:
        if a.crashed is not None or a.proc.stdin is None:
            raise AgentCrashed("agent process is gone", agent=a.id)
        data = (dumps(msg.to_dict()) + "\n").encode()
        try:
            async with a.lock:
                a.proc.stdin.write(data)
                await a.proc.stdin.drain()
        except (BrokenPipeError, ConnectionResetError, RuntimeError) as exc:
            raise AgentCrashed(f"cannot reach agent process: {exc}", agent=a.id) from exc

    async def request(self, agent: str, cmd: str, *, timeout_s: float | None = None,
                      **args: Any) -> dict[str, Any]:
        """Ask ``agent`` to perform ``cmd``; return its result.

        Raises:
            AgentCrashed: the process is gone (before or while answering).
            StepTimeout: no answer within ``timeout_s`` (default ``timeouts.step_s``).
            AgentStepError: the agent answered with an error.
        """
        a = self.agents.get(agent)
        if a is None:
            raise LiveRunError("no such agent", agent=agent)
        self._n += 1
        n = self._n
        fut: asyncio.Future[Reply] = asyncio.get_running_loop().create_future()
        a.pending[n] = fut
        try:
            await self._send(a, Command(n, cmd, args))
            msg = await asyncio.wait_for(fut, timeout_s or self.manifest.timeouts.step_s)
        except TimeoutError as exc:
            raise StepTimeout("agent did not answer in time", agent=agent, cmd=cmd) from exc
        finally:
            a.pending.pop(n, None)
        if not msg.ok:
            raise AgentStepError(str(msg.error), agent=agent, cmd=cmd)
        res: dict[str, Any] = dict(msg.result or {})
        return res

    async def _route(self, a: _Agent, msg: PeerCall) -> None:
        n = msg.call
        target = self.roles.get(msg.to, msg.to)
        try:
            res = await self.request(target, msg.cmd, **msg.args)
            reply = PeerReply(n, True, res)
        except Exception as exc:
            reply = PeerReply(n, False, error=f"{type(exc).__name__}: {exc}")
        with contextlib.suppress(LiveRunError):
            await self._send(a, reply)

    # -- faults and stop ------------------------------------------------------------
    async def kill(self, agent: str) -> None:
        """SIGKILL one agent process (reliability fault injection) and record the crash."""
        a = self.agents[agent]
        a.killed = True  # before the signal: the reader may see EOF before we resume
        with contextlib.suppress(ProcessLookupError):
            a.proc.kill()
        rc = None
        with contextlib.suppress(Exception):
            rc = await asyncio.wait_for(a.proc.wait(), 5.0)
        self._crashed(a, rc, injected=True)
        if a.reader is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(asyncio.shield(a.reader), 5.0)

    async def stop(self, timeout_s: float = 5.0) -> None:
        """Stop every process: shutdown message, then SIGTERM, then SIGKILL (bounded)."""
        self._closing = True
        alive = [a for a in self.agents.values() if a.proc.returncode is None]
        for a in alive:
            a.stopping = True

        async def one(a: _Agent) -> None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.request(a.id, "shutdown", timeout_s=timeout_s),
                                       timeout_s)
            with contextlib.suppress(Exception):
                if a.proc.stdin is not None:
                    a.proc.stdin.close()
            try:
                await asyncio.wait_for(a.proc.wait(), timeout_s)
                return
            except (TimeoutError, Exception):
                pass
            for sig in (signal.SIGTERM, signal.SIGKILL):
                with contextlib.suppress(ProcessLookupError):
                    a.proc.send_signal(sig)
                try:
                    await asyncio.wait_for(a.proc.wait(), timeout_s)
                    return
                except (TimeoutError, Exception):
                    continue

        await asyncio.gather(*(one(a) for a in alive))
        for a in self.agents.values():
            if a.reader is not None:
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(a.reader, timeout_s)

    def alive(self) -> list[str]:
        """Ids of agent processes still running."""
        return [a.id for a in self.agents.values() if a.proc.returncode is None]
