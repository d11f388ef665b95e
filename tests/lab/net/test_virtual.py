"""The in-process transport on virtual time, and the gate running over it."""

from __future__ import annotations

import asyncio

import pytest

from icore._clock import ManualClock
from icore.fence import Outcome, Reason, avalidate, validate
from icore.memory import AsyncOwnerAccess, MemoryStore, OwnerAccess
from icore.net import HeadQuery as HQ
from icore.net import RemoteError, RpcTimeout, encode_frame
from icore.records import Record
from icore_lab.net import (
    DEFAULT_TLS_COST,
    AsyncVirtualTransport,
    FixedLink,
    HostCost,
    HostCpu,
    LinkPair,
    Loopback,
    TraceLink,
    VirtualTimeLoop,
    VirtualTransport,
    run_virtual,
)

from .conftest import World


def _gate(world: World, owners: OwnerAccess, replanned: bool = False) -> object:
    return validate(roots=[world.plan.id], deps=["req/a", "req/b", "req/c"],
                    lookup=world.local.lookup, ownership=world.ownership, owners=owners,
                    replanned=replanned)


class TestSyncVirtual:
    """VirtualTransport implements OwnerAccess; the gate runs unchanged over it."""

    def test_protocol(self, world: World) -> None:
        """It is an OwnerAccess."""
        assert isinstance(VirtualTransport(world.stores), OwnerAccess)

    def test_authorized_then_stale(self, world: World) -> None:
        """Current plan authorized; after a revision replan-required with fresh records."""
        net = VirtualTransport(world.stores)
        d = _gate(world, net)
        assert d.outcome is Outcome.AUTHORIZED  # type: ignore[attr-defined]
        new = world.revise("b")
        d = _gate(world, net)
        assert d.outcome is Outcome.REPLAN_REQUIRED  # type: ignore[attr-defined]
        assert d.fresh["req/b"].id == new.id  # type: ignore[attr-defined]
        d = _gate(world, net, replanned=True)
        assert d.outcome is Outcome.BLOCKED  # type: ignore[attr-defined]

    def test_time_and_bytes_on_fixed_link(self, world: World) -> None:
        """Reused connections: first RPC pays 2 handshake RTTs; bytes are exact frames."""
        clock = ManualClock()
        net = VirtualTransport(world.stores, clock=clock, up=FixedLink(10.0),
                               down=FixedLink(10.0))
        net.query_heads("a", ["req/a"])
        assert clock.now_ms() == 60.0   # TCP RTT + TLS RTT + request RTT
        before = net.stats.snapshot()
        net.query_heads("a", ["req/a"], known={"req/a": world.reqs["a"].id})
        assert clock.now_ms() == 80.0
        delta = net.stats - before
        q = encode_frame(HQ(2, ("req/a",), {"req/a": world.reqs["a"].id}))
        assert delta.bytes_out == len(q) + DEFAULT_TLS_COST.record_overhead
        assert delta.connections == 0 and delta.rpcs == 1

    def test_new_connection_per_rpc(self, world: World) -> None:
        """Per-RPC connections pay 3 RTTs and the handshake bytes every time."""
        net = VirtualTransport(world.stores, up=FixedLink(5.0), down=FixedLink(5.0),
                               new_connection_per_rpc=True)
        for i in range(3):
            net.query_heads("a", ["req/a"])
            assert net.clock.now_ms() == 30.0 * (i + 1)
        assert net.stats.connections == 3
        assert net.stats.handshake_bytes == 3 * DEFAULT_TLS_COST.handshake_bytes
        assert net.stats.total_bytes > 3 * DEFAULT_TLS_COST.handshake_bytes

    def test_unavailable_owner_times_out(self, world: World) -> None:
        """A silent owner costs the full timeout; the gate blocks."""
        net = VirtualTransport(world.stores)
        net.unavailable.add("c")
        with pytest.raises(RpcTimeout):
            net.query_heads("c", ["req/c"], timeout_s=0.5)
        assert net.clock.now_ms() == 500.0
        d = _gate(world, net)
        assert d.outcome is Outcome.BLOCKED  # type: ignore[attr-defined]
        assert d.reason is Reason.OWNER_UNAVAILABLE  # type: ignore[attr-defined]

    def test_commit_writer_is_identity(self, world: World) -> None:
        """Commits carry the transport identity as writer; others' keys are refused."""
        old = world.reqs["a"]
        rec = Record.create(key="req/a", owner="a", seq=2, content={"v": 2}, parents=[old.id])
        with pytest.raises(RemoteError) as ei:
            VirtualTransport(world.stores, identity="mallory").commit("a", rec)
        assert ei.value.fields["remote_code"] == "ownership"
        ack = VirtualTransport(world.stores, identity="a").commit("a", rec)
        assert ack.record_id == rec.id and ack.created

    def test_inline_small_changed_record(self, world: World) -> None:
        """With inlining the gate needs no fetch round trip."""
        new = world.revise("a")
        net = VirtualTransport(world.stores, inline_max_bytes=1024)
        d = _gate(world, net)
        assert d.outcome is Outcome.REPLAN_REQUIRED  # type: ignore[attr-defined]
        assert d.fresh["req/a"].id == new.id  # type: ignore[attr-defined]
        assert net.stats.rpcs == 3  # heads from a, b, c; no fetch


class TestAsyncVirtual:
    """AsyncVirtualTransport on a VirtualTimeLoop: concurrency in virtual time."""

    def test_protocol(self, world: World) -> None:
        """It is an AsyncOwnerAccess."""
        assert isinstance(AsyncVirtualTransport(world.stores), AsyncOwnerAccess)

    def test_owners_queried_concurrently(self, world: World) -> None:
        """Three owners at 10 ms one way cost one 20 ms round trip, not three."""
        net = AsyncVirtualTransport(world.stores, path=LinkPair(FixedLink(10.0),
                                                                FixedLink(10.0)))
        net.warm()
        d = run_virtual(avalidate(roots=[world.plan.id], deps=["req/a", "req/b", "req/c"],
                                  lookup=world.local.lookup, ownership=world.ownership,
                                  owners=net), net.clock)
        assert d.outcome is Outcome.AUTHORIZED
        assert net.clock.now_ms() == 20.0

    def test_timeout_in_virtual_time(self, world: World) -> None:
        """asyncio timeouts fire in virtual time (no real waiting)."""
        net = AsyncVirtualTransport(world.stores)
        net.unavailable.add("a")

        async def go() -> float:
            with pytest.raises(RpcTimeout):
                await net.query_heads("a", ["req/a"], timeout_s=2.0)
            await asyncio.sleep(3600)
            return net.clock.now_ms()

        assert run_virtual(go(), net.clock) == 2000.0 + 3_600_000.0

    def test_revision_during_flight_is_seen(self, world: World) -> None:
        """The owner reads its store when the request arrives (virtual time)."""
        net = AsyncVirtualTransport(world.stores, up=FixedLink(50.0), down=Loopback())
        net.warm()

        async def go() -> str:
            async def revise() -> None:
                await asyncio.sleep(0.010)
                world.revise("a")
            task = asyncio.get_running_loop().create_task(revise())
            rep = await net.query_heads("a", ["req/a"])
            await task
            return rep.heads["req/a"].record_id

        assert run_virtual(go(), net.clock) == world.reqs["a"].id

    def test_handshakes_interleave_on_one_trace_link(self, world: World) -> None:
        """Concurrent new-connection RPCs over one trace path share its opportunities in
        send-time order (as packets share mm-link's queue) instead of queueing whole RPCs
        behind each other: three at once finish long before three in a row."""
        ops = list(range(10, 100_000, 10))  # one 1500-byte opportunity every 10 ms

        def transport() -> AsyncVirtualTransport:
            path = LinkPair(TraceLink(ops, base_delay_ms=5), TraceLink(ops, base_delay_ms=5))
            return AsyncVirtualTransport(world.stores, path=path,
                                         new_connection_per_rpc=True)

        one = transport()
        run_virtual(one.query_heads("a", ["req/a"]), one.clock)
        single = one.clock.now_ms()

        par = transport()

        async def together() -> None:
            await asyncio.gather(*(par.query_heads(o, [f"req/{o}"]) for o in "abc"))

        run_virtual(together(), par.clock)
        seq = transport()

        async def in_a_row() -> None:
            for o in "abc":
                await seq.query_heads(o, [f"req/{o}"])

        run_virtual(in_a_row(), seq.clock)
        assert seq.clock.now_ms() > 2.5 * single
        assert par.clock.now_ms() < 1.5 * single, (par.clock.now_ms(), single)
        assert par.stats.bytes_out == seq.stats.bytes_out  # same bytes, less waiting

    def test_timeout_sends_nothing_more(self, world: World) -> None:
        """An RPC that times out mid-handshake never sends its later flights."""
        ops = [100_000]  # the first opportunity is 100 s away
        net = AsyncVirtualTransport(world.stores, path=LinkPair(TraceLink(ops), Loopback()),
                                    new_connection_per_rpc=True)
        with pytest.raises(RpcTimeout):
            run_virtual(net.query_heads("a", ["req/a"], timeout_s=2.0), net.clock)
        assert net.clock.now_ms() == 2000.0
        assert net.stats.bytes_out == 0 and net.stats.frames_out == 0

    def test_announce_and_replicate_async(self, world: World) -> None:
        """The async transport announces envelopes and replicates records concurrently."""
        new = world.revise("a")
        replicas = {b: MemoryStore(world.ownership, b) for b in ("b", "c")}
        net = AsyncVirtualTransport(replicas, identity="a",
                                    path=LinkPair(FixedLink(10.0), FixedLink(10.0)))
        net.warm()

        async def go() -> None:
            await asyncio.gather(*(net.announce(b, [new]) for b in replicas))

        run_virtual(go(), net.clock)
        assert net.clock.now_ms() == 20.0  # both announcements in one round trip
        for store in replicas.values():
            assert store.installed_head("req/a").record_id == new.id  # type: ignore[union-attr]
            assert not store.get(new.id).has_content  # type: ignore[union-attr]
        run_virtual(net.replicate("b", [new]), net.clock)
        assert replicas["b"].get(new.id).content == new.content  # type: ignore[union-attr]
        bad = AsyncVirtualTransport(replicas, identity="c")
        with pytest.raises(RemoteError):  # only one's own records
            run_virtual(bad.announce("b", [new]), bad.clock)

    def test_loop_class(self) -> None:
        """VirtualTimeLoop.time() follows its clock."""
        clock = ManualClock(1500.0)
        loop = VirtualTimeLoop(clock)
        try:
            assert loop.time() == 1.5
        finally:
            loop.close()


class TestWritesAndReplication:
    """Central commits, head announcements and replication through the handler."""

    def test_central_store_commits(self, world: World) -> None:
        """A central store (agent=None) accepts each owner's own commits only."""
        central = MemoryStore(world.ownership, None)
        rec = Record.create(key="req/a", owner="a", seq=1, content={"v": 1})
        assert VirtualTransport({"central": central}, identity="a").commit("central", rec)
        with pytest.raises(RemoteError):
            VirtualTransport({"central": central}, identity="b").commit("central", rec)
        assert central.head("req/a").record_id == rec.id  # type: ignore[union-attr]

    def test_announce_and_replicate(self, world: World) -> None:
        """Announcements install envelopes only; replication installs content."""
        new = world.revise("a")
        replica = MemoryStore(world.ownership, "b")
        net = VirtualTransport({"b": replica}, identity="a")
        net.warm()
        before = net.stats.snapshot()
        net.announce("b", [new])
        announced = (net.stats - before).bytes_out
        assert replica.installed_head("req/a").record_id == new.id  # type: ignore[union-attr]
        assert not replica.get(new.id).has_content  # type: ignore[union-attr]
        before = net.stats.snapshot()
        net.replicate("b", [new])
        assert (net.stats - before).bytes_out > announced
        assert replica.get(new.id).content == new.content  # type: ignore[union-attr]
        with pytest.raises(RemoteError):  # only one's own records
            VirtualTransport({"b": replica}, identity="c").announce("b", [new])


class TestHostCpu:
    """End-host CPU on virtual time: handshakes of one process queue for its CPU."""

    def test_cpu_is_fifo(self) -> None:
        """Work waits for earlier work; zero-cost work does not wait."""
        cpu = HostCpu()
        assert cpu.run(0.0, 2.0) == 2.0
        assert cpu.run(1.0, 2.0) == 4.0
        assert cpu.run(1.5, 0.0) == 1.5
        assert cpu.run(10.0, 1.0) == 11.0

    def test_bad_cost(self) -> None:
        """Negative or non-finite costs are refused."""
        for bad in (-1.0, float("nan"), float("inf")):
            with pytest.raises(ValueError, match="handshake_client_ms"):
                HostCost(handshake_client_ms=bad)

    def test_concurrent_handshakes_share_the_client_cpu(self, world: World) -> None:
        """On loopback, three concurrent new-connection queries from one client pay its
        handshake CPU one after another, while the three owners work in parallel."""
        cost = HostCost(message_ms=0.0, handshake_client_ms=3.0, handshake_server_ms=2.0)

        def run(n_owners: int) -> float:
            net = AsyncVirtualTransport(world.stores, new_connection_per_rpc=True,
                                        host_cost=cost)

            async def go() -> None:
                await asyncio.gather(*(net.query_heads(o, [f"req/{o}"])
                                       for o in "abc"[:n_owners]))

            run_virtual(go(), net.clock)
            return net.clock.now_ms()

        assert run(1) == 5.0          # 2 ms owner handshake, then 3 ms client handshake
        assert run(3) == 2.0 + 9.0    # owners in parallel, the client's 3 x 3 ms in a row

    def test_shared_owner_cpu_across_clients(self, world: World) -> None:
        """Two clients of one owner queue for that owner's CPU when they share it."""
        cost = HostCost(handshake_server_ms=4.0)
        owner_cpu = {"a": HostCpu()}
        clock = ManualClock()
        nets = [AsyncVirtualTransport(world.stores, clock=clock, identity=f"x{i}",
                                      new_connection_per_rpc=True, host_cost=cost,
                                      owner_cpus=owner_cpu) for i in range(2)]

        async def go() -> None:
            await asyncio.gather(*(n.query_heads("a", ["req/a"]) for n in nets))

        run_virtual(go(), clock)
        assert clock.now_ms() == 8.0
