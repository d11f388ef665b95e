"""The network model: loopback, fixed links, Mahimahi trace semantics."""

from __future__ import annotations

import itertools
import math
import os
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from icore_lab.net import (
    DEFAULT_BASE_DELAY_MS,
    PACKET_BYTES,
    SEGMENT_HEADER_BYTES,
    SEGMENT_PAYLOAD_BYTES,
    FixedLink,
    Link,
    Loopback,
    TraceLink,
    default_att_trace,
    link_by_name,
    path_by_name,
    wire_bytes,
)


def _mahimahi_reference(ops: list[int], offset: int,
                        sends: list[tuple[float, int]]) -> list[float]:
    """Packet-level replay of mm-link's ``LinkQueue`` (one 1500-byte opportunity per trace
    line, byte leftovers carried to the next queued packet, trace looping), written from
    its description, independent of :class:`TraceLink`. Returns each message's arrival.
    Send times within 1e-9 ms below a whole millisecond count as that millisecond, as
    documented by :class:`TraceLink` (virtual time's float noise)."""
    period = ops[-1]

    def opportunity(i: int) -> int:  # absolute index -> time in trace ms
        loop, j = divmod(i, len(ops))
        return loop * period + ops[j]

    queue: list[tuple[int, int, int]] = []  # (enqueue ms, message index, packet bytes)
    for m, (t, n) in enumerate(sends):
        packets = [SEGMENT_PAYLOAD_BYTES] * (n // SEGMENT_PAYLOAD_BYTES)
        if n % SEGMENT_PAYLOAD_BYTES or not packets:
            packets.append(n % SEGMENT_PAYLOAD_BYTES)
        queue += [(math.floor(t + offset + 1e-9), m, p + SEGMENT_HEADER_BYTES) for p in packets]
    arrival = [0.0] * len(sends)
    i, head, in_transit = 0, 0, 0
    while head < len(queue):
        now = opportunity(i)
        budget = PACKET_BYTES
        while budget > 0 and head < len(queue) and queue[head][0] < now:
            if in_transit == 0:
                in_transit = queue[head][2]
            used = min(budget, in_transit)
            budget -= used
            in_transit -= used
            if in_transit == 0:
                arrival[queue[head][1]] = float(now - offset)
                head += 1
        i += 1
    return arrival


class TestLoopbackAndFixed:
    """Constant links and loss/jitter models."""

    def test_loopback(self) -> None:
        """Loopback adds its constant delay only."""
        assert Loopback().deliver(5.0, 10**6) == 5.0
        assert Loopback(0.5).deliver(5.0, 1) == 5.5
        assert isinstance(Loopback(), Link)

    def test_fixed_delay(self) -> None:
        """No jitter or loss: arrival = send + delay."""
        assert FixedLink(20.0).deliver(100.0, 4096) == 120.0

    def test_seeded_and_in_order(self) -> None:
        """Same seed, same arrivals; arrivals never go backwards (TCP stream)."""
        a = FixedLink(10.0, jitter_ms=30.0, loss=0.2, seed=7)
        b = FixedLink(10.0, jitter_ms=30.0, loss=0.2, seed=7)
        ta = [a.deliver(float(i), 3000) for i in range(200)]
        tb = [b.deliver(float(i), 3000) for i in range(200)]
        assert ta == tb
        assert all(y >= x for x, y in itertools.pairwise(ta))

    def test_loss_costs_rto(self) -> None:
        """With loss every extra delay is a multiple of the RTO (jitter off)."""
        link = FixedLink(0.0, loss=0.5, seed=1, rto_ms=200.0)
        extras = [link.deliver(1e6 * i, 1500) - 1e6 * i for i in range(100)]
        assert all(e % 200.0 == 0 for e in extras)
        assert any(e > 0 for e in extras) and any(e == 0 for e in extras)

    def test_bandwidth_queues(self) -> None:
        """A 1 Mbit/s link serializes 125 kB in 1 s and queues the next message."""
        link = FixedLink(0.0, bandwidth_mbps=1.0)
        assert link.deliver(0.0, 125_000) == pytest.approx(1000.0)
        assert link.deliver(0.0, 125) == pytest.approx(1001.0)

    @pytest.mark.parametrize("kw", [{"delay_ms": -1}, {"loss": 1.0}, {"jitter_ms": -2}])
    def test_invalid(self, kw: dict[str, float]) -> None:
        """Bad parameters are ValueError."""
        with pytest.raises(ValueError, match="must"):
            FixedLink(**kw)


class TestTrace:
    """Mahimahi semantics: opportunities, FIFO, loop at the last timestamp, offset."""

    def test_bytes_share_opportunities(self) -> None:
        """Opportunities carry 1500 bytes shared by queued packets (mm-link LinkQueue):
        arrival = the opportunity that carries the message's last byte + base delay."""
        link = TraceLink([1, 2, 3, 10], base_delay_ms=0)
        assert link.deliver(0.0, 100) == 1.0       # 152 wire bytes at opportunity 1
        assert link.deliver(0.0, 1000) == 1.0      # 1052 more still fit in it
        assert link.deliver(0.0, 1448) == 2.0      # 296 bytes at 1, 1204 at 2
        assert link.deliver(0.0, 1) == 2.0         # opportunity 2 has 296 bytes left
        assert link.deliver(0.0, 2000) == 10.0     # 243 at 2, 1500 at 3, 361 at 10

    def test_wire_bytes(self) -> None:
        """One IPv4/TCP header per MSS-sized segment; an empty segment (SYN) still costs."""
        assert wire_bytes(0) == SEGMENT_HEADER_BYTES
        assert wire_bytes(SEGMENT_PAYLOAD_BYTES) == PACKET_BYTES
        assert wire_bytes(SEGMENT_PAYLOAD_BYTES + 1) == SEGMENT_PAYLOAD_BYTES + 1 + 104
        with pytest.raises(ValueError, match="nbytes"):
            wire_bytes(-1)

    def test_duplicates_are_parallel_opportunities(self) -> None:
        """Repeated timestamps deliver several packets in the same millisecond."""
        link = TraceLink([5, 5, 5, 9], base_delay_ms=0)
        assert link.deliver(0.0, 4000) == 5.0

    def test_idle_capacity_is_lost(self) -> None:
        """Opportunities up to the send millisecond are not banked or used."""
        link = TraceLink([1, 2, 3, 4, 100], base_delay_ms=0)
        assert link.deliver(3.5, 1) == 4.0
        assert link.deliver(3.5, 1448) == 100.0    # 1447 bytes left at 4: not enough
        assert link.deliver(4.0, 1) == 100.0       # opportunity 4 already fired at ms 4

    @settings(max_examples=200, deadline=None)
    @given(gaps=st.lists(st.integers(0, 30), min_size=1, max_size=40),
           sends=st.lists(st.tuples(st.floats(0, 60, allow_nan=False), st.integers(0, 5000)),
                          max_size=30),
           offset=st.integers(0, 50))
    @example(gaps=[0], sends=[(1.999999999999993, 0)], offset=0)  # float noise below 2 ms
    def test_matches_packet_level_mahimahi(self, gaps: list[int],
                                           sends: list[tuple[float, int]],
                                           offset: int) -> None:
        """Property: arrivals equal a packet-by-packet replay of mm-link's queue."""
        ops = list(itertools.accumulate(gaps, initial=1))
        sends = sorted(sends)
        link = TraceLink(ops, offset_ms=offset, base_delay_ms=0)
        got = [link.deliver(t, n) for t, n in sends]
        assert got == _mahimahi_reference(ops, offset, sends)

    def test_loops_at_last_timestamp(self) -> None:
        """The trace repeats with period = last timestamp (mm-link)."""
        link = TraceLink([0, 10], base_delay_ms=0)
        full = SEGMENT_PAYLOAD_BYTES  # one whole 1500-byte packet
        assert link.deliver(11.0, full) == 20.0  # loop 1: opportunities at 10, 20
        assert link.deliver(11.0, full) == 20.0  # second opportunity at t=20 (0+period)
        assert link.deliver(11.0, full) == 30.0

    def test_offset_and_base_delay(self) -> None:
        """offset_ms shifts the trace start; base delay is added."""
        link = TraceLink([100, 200, 300], offset_ms=150, base_delay_ms=10)
        assert link.deliver(0.0, 1) == 200 - 150 + 10

    def test_real_att_files(self, shared_data: Path) -> None:
        """The default AT&T file loads; uplink starts late (831 ms) at offset 0."""
        p = default_att_trace("up")
        assert p.name == "ATT-LTE-driving.up"
        up = TraceLink.from_file(p, base_delay_ms=0)
        assert up.deliver(0.0, 1) == 831.0
        assert 0.8 < up.mean_mbps < 0.87

    @pytest.mark.parametrize("name", ["att", "att-2016", "tmobile", "verizon"])
    def test_named_paths(self, shared_data: Path, name: str) -> None:
        """Every named path loads and its links are monotone FIFO."""
        path = path_by_name(name, offset_ms=5000)
        ts = [path.down.deliver(float(i), 4096) for i in range(50)]
        assert all(b >= a for a, b in itertools.pairwise(ts))
        assert ts[0] >= DEFAULT_BASE_DELAY_MS

    def test_link_by_name(self, shared_data: Path) -> None:
        """Unknown names are refused; loopback needs no files."""
        assert isinstance(link_by_name("loopback"), Loopback)
        with pytest.raises(ValueError, match="unknown link"):
            link_by_name("sprint")

    @pytest.mark.timeout(30)
    def test_fifo_trace_is_refused_unopened(self, tmp_path: Path) -> None:
        """A FIFO given as a trace file is refused without blocking on open."""
        fifo = tmp_path / "trace.up"
        os.mkfifo(fifo)
        with pytest.raises(ValueError, match="FIFO"):
            TraceLink.from_file(fifo)

    def test_invalid_trace(self, tmp_path: Path) -> None:
        """Decreasing or empty traces are refused."""
        with pytest.raises(ValueError, match="non-decreasing"):
            TraceLink([5, 3])
        f = tmp_path / "t"
        f.write_text("1\nx\n")
        with pytest.raises(ValueError, match="not an integer trace"):
            TraceLink.from_file(f)
