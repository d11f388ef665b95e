"""The PlanFence replay's default transport: in-process, virtual time.

Implements planfence Sec. 5.1, App. A; design.md 3.4.

Every request and reply is an encoded frame of :mod:`icore.net` served by the world's
:class:`~icore.net.OwnerHandler`; each agent has its own access path (a fresh
:class:`~icore.net.LinkPair` of the chosen trace at the chosen offset) and the TCP + TLS
1.3 handshakes of a new connection per RPC are modelled, on a
:class:`~icore.net.VirtualTimeLoop`. Background replication runs on its own clock and
private CPUs: its bytes count, its time does not.
"""

from __future__ import annotations

import asyncio
from typing import Any

from icore._clock import ManualClock
from icore_lab.bench.planfence._services import ReplayWorld, make_path
from icore_lab.bench.planfence._spec import NetSpec
from icore_lab.net import (
    DEFAULT_TLS_COST,
    AsyncVirtualTransport,
    LinkPair,
    VirtualTimeLoop,
    VirtualTransport,
)


class InprocTransport:
    """:class:`~icore_lab.bench.planfence._services.ReplayTransport` on virtual time.

    Args:
        net: the network (links, handshakes, host costs, server time).
    """

    def __init__(self, net: NetSpec) -> None:
        self.net = net
        self.clock = ManualClock(0.0)
        self.loop: asyncio.AbstractEventLoop = VirtualTimeLoop(self.clock)
        self.background_clock = ManualClock(0.0)
        self.paths: dict[str, list[LinkPair]] = {}
        self._world: ReplayWorld | None = None

    @property
    def world(self) -> ReplayWorld:
        """The world the transport serves (after :meth:`start`)."""
        assert self._world is not None, "InprocTransport.start() was not called"
        return self._world

    def start(self, world: ReplayWorld) -> None:
        """Serve ``world`` (handlers are built per client)."""
        self._world = world

    def _path(self, agent: str) -> LinkPair:
        pair = make_path(self.net)
        self.paths.setdefault(agent, []).append(pair)
        return pair

    def _common(self) -> dict[str, Any]:
        n = self.net
        return {"new_connection_per_rpc": n.new_connection_per_rpc,
                "tls": DEFAULT_TLS_COST if n.tls else None,
                "server_time_ms": n.server_time_ms, "host_cost": n.host_cost}

    def client(self, agent: str) -> AsyncVirtualTransport:
        """A new async virtual transport of ``agent`` (its own access path)."""
        hs = self.world.handlers(agent)
        return AsyncVirtualTransport(
            hs, clock=self.clock, path=self._path(agent), identity=agent, **self._common(),
            cpu=self.world.agent_cpus[agent], owner_cpus=self.world.owner_cpus(hs))

    def background(self, agent: str) -> VirtualTransport:
        """A new sync virtual transport of ``agent`` on the background clock.

        The background clock models private CPUs.
        """
        return VirtualTransport(self.world.handlers(agent), clock=self.background_clock,
                                path=self._path(agent), identity=agent, **self._common())

    def sync_client(self, agent: str) -> VirtualTransport:
        """A new sync virtual transport of ``agent`` on the episode clock."""
        hs = self.world.handlers(agent)
        return VirtualTransport(
            hs, clock=self.clock, path=self._path(agent), identity=agent, **self._common(),
            cpu=self.world.agent_cpus[agent], owner_cpus=self.world.owner_cpus(hs))

    def sync_background_clock(self) -> None:
        """Move the background clock up to the episode clock (never backwards)."""
        self.background_clock.set(max(self.background_clock.now_ms(), self.clock.now_ms()))

    def close(self) -> None:
        """Close the virtual-time loop."""
        self.loop.close()


__all__ = ["InprocTransport"]
