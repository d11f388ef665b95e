"""The PlanFence replay over real loopback TCP with mutual TLS 1.3 (``--transport tcp``).

Same schedules, stores, protocol, gate and policies as the virtual-time replay
(:class:`~icore_lab.bench.planfence._replay.Episode` is given this transport instead of
:class:`~icore_lab.bench.planfence._inproc.InprocTransport`); only the transport differs:
every agent's store is served by an :class:`~icore.net.ServerThread` on 127.0.0.1, every
agent talks through an :class:`~icore.net.OwnerClient` (new connection per RPC by default,
the paper's setting), and time is the wall clock, so stall is measured, not modelled. A trace link
given in the :class:`NetSpec` shapes the client traffic in real time (slow); loopback is
the intended use. Fault injection (App. C) is not supported over TCP.
"""

from __future__ import annotations

import asyncio
import contextlib
import tempfile
import time
from pathlib import Path
from typing import Any

from icore._clock import ManualClock
from icore.fence import replica_service
from icore.memory import Store
from icore.net import (
    OwnerClient,
    OwnerHandler,
    ServerThread,
    SyncOwnerClient,
    client_context,
    init_team_certs,
    server_context,
)
from icore_lab.bench._errors import TransportUnavailable
from icore_lab.bench.planfence._services import ReplayWorld, ReplicaHandler, make_path
from icore_lab.bench.planfence._spec import CENTRAL, NetSpec
from icore_lab.workloads import ActStep, Fault, Schedule

MAX_AGENTS = 8
"""Team certificates are made for agent-0 .. agent-7 (Table 5's largest team)."""

_CERTS: Path | None = None


def team_certs() -> Path:
    """Create (once per process) a team CA and certificates for every replay identity."""
    global _CERTS
    if _CERTS is None:
        d = Path(tempfile.mkdtemp(prefix="icore-planfence-certs-"))
        agents = [f"agent-{i}" for i in range(MAX_AGENTS)]
        init_team_certs(d, [*agents, CENTRAL, *(replica_service(a) for a in agents)])
        _CERTS = d
    return _CERTS


class _WallClock(ManualClock):
    """Wall-clock time in ms since the episode started (``advance`` sleeps)."""

    def __init__(self) -> None:
        super().__init__(0.0)
        self._t0 = time.perf_counter()

    def now_ms(self) -> float:
        """Milliseconds since the episode started."""
        return (time.perf_counter() - self._t0) * 1000.0

    def advance(self, delta_ms: float) -> None:
        """Sleep ``delta_ms``."""
        time.sleep(max(0.0, delta_ms) / 1000.0)

    def set(self, t_ms: float) -> None:
        """Sleep until ``t_ms`` (never backwards)."""
        self.advance(t_ms - self.now_ms())


class TcpTransport:
    """:class:`~icore_lab.bench.planfence._services.ReplayTransport` over real TCP + mutual TLS.

    On 127.0.0.1, wall-clock time.

    Args:
        schedule: the schedule the episode replays (checked here).
        net: the network (a trace link shapes client traffic in real time).

    Raises:
        TransportUnavailable: the schedule injects App. C faults, or has more than
            :data:`MAX_AGENTS` agents.
    """

    def __init__(self, schedule: Schedule, net: NetSpec) -> None:
        if any(isinstance(st, ActStep) and st.fault is not Fault.NONE for st in schedule.steps):
            raise TransportUnavailable("fault injection (App. C) runs on the in-process "
                                       "transport only", transport="tcp")
        if len(schedule.agents) > MAX_AGENTS:
            raise TransportUnavailable(f"at most {MAX_AGENTS} agents over TCP",
                                       transport="tcp")
        self.net = net
        self.loop: asyncio.AbstractEventLoop = asyncio.new_event_loop()
        self.clock: ManualClock = _WallClock()
        self.certs = team_certs()
        self.servers: dict[str, ServerThread] = {}
        self._clients: list[OwnerClient] = []
        self._sync: list[SyncOwnerClient] = []

    # -- services ----------------------------------------------------------------------
    def _serve(self, name: str, store: Store, handler: OwnerHandler) -> None:
        srv = ServerThread(store, agent=name, ssl_context=server_context(self.certs, name))
        srv.server.handler = handler
        self.servers[name] = srv

    def start(self, world: ReplayWorld) -> None:
        """Start one TLS server per service of ``world``.

        Centralized lineage: the central service, and one server per owner answering
        from the central store (replies name that owner). Otherwise one per agent (its
        owner handler) and, with replica views, one per replica view.
        """
        if world.strategy.central:
            self._serve(CENTRAL, world.central, OwnerHandler(world.central, agent=CENTRAL))
            for o in sorted(world.ownership.owners()):
                self._serve(o, world.central, OwnerHandler(world.central, agent=o))
            return
        for a, st in world.stores.items():
            self._serve(a, st, world.owner_handler(a))
            if world.strategy.replica_views:
                self._serve(replica_service(a), st, ReplicaHandler(st, agent=a))

    def _addresses(self, agent: str) -> dict[str, tuple[str, int]]:
        return {n: srv.address for n, srv in self.servers.items() if n != agent}

    def _client_kw(self, agent: str) -> dict[str, Any]:
        return {"identity": agent, "ssl_context": client_context(self.certs, agent),
                "new_connection_per_rpc": self.net.new_connection_per_rpc,
                "path": None if self.net.link == "loopback" else make_path(self.net)}

    # -- clients -------------------------------------------------------------------------
    def client(self, agent: str) -> OwnerClient:
        """A new async TCP client of ``agent``."""
        t = OwnerClient(self._addresses(agent), **self._client_kw(agent))
        self._clients.append(t)
        return t

    def background(self, agent: str) -> SyncOwnerClient:
        """A new sync TCP client of ``agent`` (background replication)."""
        return self.sync_client(agent)

    def sync_client(self, agent: str) -> SyncOwnerClient:
        """A new sync TCP client of ``agent``."""
        t = SyncOwnerClient(self._addresses(agent), **self._client_kw(agent))
        self._sync.append(t)
        return t

    def sync_background_clock(self) -> None:
        """Nothing to do: background replication runs on the wall clock."""

    def close(self) -> None:
        """Close every client and service, then the loop."""
        for c in self._clients:
            with contextlib.suppress(Exception):
                self.loop.run_until_complete(c.close())
        for sc in self._sync:
            with contextlib.suppress(Exception):
                sc.close()
        for srv in self.servers.values():
            with contextlib.suppress(Exception):
                srv.close()
        self.loop.close()


__all__ = ["MAX_AGENTS", "TcpTransport", "team_certs"]
