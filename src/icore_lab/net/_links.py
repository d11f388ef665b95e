"""Network model: links that map (send time, size) to arrival time (design.md 3.4).

A :class:`Link` is one direction of a path. ``deliver(t_ms, nbytes)`` returns the arrival
time in ms of a message of ``nbytes`` sent at ``t_ms``; models may keep queue state (a
trace-driven link serves messages in FIFO order, so a large transfer delays the next one).
Links are pure: no clock and no I/O besides reading a trace file once.

* :class:`Loopback` - zero delay (or a constant).
* :class:`FixedLink` - constant propagation delay, uniform jitter, optional bandwidth and
  packet loss (each 1500-byte packet is lost with probability ``loss``; a lost packet is
  retransmitted after ``rto_ms``, as TCP would - the stream stays in order), planfence
  Fig. 2b.
* :class:`TraceLink` - Mahimahi trace-driven capacity (planfence Sec. 5.1, Fig. 2a): each
  line of a trace file is one 1500-byte delivery opportunity at that millisecond, shared
  byte by byte by the packets queued before it (``mm-link``'s ``LinkQueue``); the trace
  loops at its last timestamp; replay starts at ``offset_ms`` into the trace; a base
  one-way propagation delay is added.

Defaults (documented in docs/net.md): the AT&T trace is Mahimahi's 2013
``ATT-LTE-driving`` pair (the Sprout-evaluation set that also gives the T-Mobile and
Verizon ``*-LTE-driving`` traces); requests travel the ``.up`` file and replies the
``.down`` file; the base one-way delay on trace links is :data:`DEFAULT_BASE_DELAY_MS`
(zero: mm-link semantics).
"""

from __future__ import annotations

import bisect
import itertools
import math
import os
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, runtime_checkable

from icore._data import shared_data_dir
from icore._files import not_a_regular_file
from icore.errors import IcoreError

PACKET_BYTES = 1500
"""Bytes one trace delivery opportunity carries (Mahimahi traces README)."""

SEGMENT_PAYLOAD_BYTES = 1448
"""TCP payload per packet (MSS of a 1500-byte IPv4 packet with TCP timestamps)."""

SEGMENT_HEADER_BYTES = 52
"""IPv4 + TCP header bytes per packet (20 + 20 + 12 bytes of timestamp option)."""


def wire_bytes(nbytes: int) -> int:
    """Bytes a ``nbytes`` TCP payload occupies on a link.

    The payload plus one IPv4/TCP header per segment (at least one segment, so a SYN or
    a pure ACK costs 52 bytes).

    Raises:
        ValueError: ``nbytes`` < 0.
    """
    if nbytes < 0:
        raise ValueError(f"nbytes must be >= 0, got {nbytes}")
    segments = max(1, -(-nbytes // SEGMENT_PAYLOAD_BYTES))
    return nbytes + segments * SEGMENT_HEADER_BYTES

DEFAULT_BASE_DELAY_MS = 0.0
"""Default one-way base propagation delay added to trace links, in ms.

Zero, as ``mm-link`` alone adds none: the trace's delivery schedule is the whole path
(planfence Sec. 5.1 replays the traces without naming a delay shell). Pass
``base_delay_ms`` to stack a propagation delay the way ``mm-delay`` would."""

DEFAULT_RTO_MS = 200.0
"""Retransmission timeout charged per lost packet by :class:`FixedLink` (Linux min RTO)."""

TRACE_FILES: dict[str, tuple[str, str]] = {
    "att": ("ATT-LTE-driving.up", "ATT-LTE-driving.down"),
    "att-2016": ("ATT-LTE-driving-2016.up", "ATT-LTE-driving-2016.down"),
    "tmobile": ("TMobile-LTE-driving.up", "TMobile-LTE-driving.down"),
    "verizon": ("Verizon-LTE-driving.up", "Verizon-LTE-driving.down"),
}
"""Named trace pairs: name -> (uplink file, downlink file) in the shared traces folder."""

DEFAULT_ATT_TRACE = "ATT-LTE-driving.up"
"""The default AT&T file (uplink; its downlink twin is ``ATT-LTE-driving.down``)."""

LINK_NAMES = ("loopback", *TRACE_FILES)
"""Names accepted by :func:`link_by_name` and :func:`path_by_name`."""


@runtime_checkable
class Link(Protocol):
    """One direction of a network path."""

    def deliver(self, t_ms: float, nbytes: int) -> float:
        """Return the arrival time (ms) of ``nbytes`` sent at ``t_ms``; may update state."""
        ...


class Loopback:
    """A link with a constant (default zero) delay and unlimited capacity.

    Args:
        delay_ms: constant one-way delay in ms.
    """

    def __init__(self, delay_ms: float = 0.0) -> None:
        if delay_ms < 0:
            raise ValueError("delay_ms must be >= 0")
        self.delay_ms = float(delay_ms)

    def deliver(self, t_ms: float, nbytes: int) -> float:
        """Return ``t_ms + delay_ms``."""
        return t_ms + self.delay_ms

    def __repr__(self) -> str:
        return f"Loopback(delay_ms={self.delay_ms})"


class FixedLink:
    """Fixed delay, uniform jitter, optional bandwidth, and packet loss with TCP recovery.

    Args:
        delay_ms: one-way propagation delay in ms.
        jitter_ms: each message gets an extra delay uniform in ``[0, jitter_ms]``.
        loss: probability that one 1500-byte packet is lost (0 <= loss < 1).
        seed: seed of the link's private random generator (deterministic replays).
        bandwidth_mbps: serialization rate in Mbit/s (None: unlimited); messages queue.
        rto_ms: delay charged per loss of one packet (retransmission timeout).

    The stream stays in order (TCP): a message never arrives before the previous one.
    """

    def __init__(self, delay_ms: float = 0.0, jitter_ms: float = 0.0, loss: float = 0.0,
                 seed: int = 0, *, bandwidth_mbps: float | None = None,
                 rto_ms: float = DEFAULT_RTO_MS) -> None:
        if delay_ms < 0 or jitter_ms < 0 or rto_ms < 0:
            raise ValueError("delay_ms, jitter_ms and rto_ms must be >= 0")
        if not 0.0 <= loss < 1.0:
            raise ValueError("loss must be in [0, 1)")
        if bandwidth_mbps is not None and bandwidth_mbps <= 0:
            raise ValueError("bandwidth_mbps must be > 0")
        self.delay_ms = float(delay_ms)
        self.jitter_ms = float(jitter_ms)
        self.loss = float(loss)
        self.seed = seed
        self.bandwidth_mbps = bandwidth_mbps
        self.rto_ms = float(rto_ms)
        self._rng = random.Random(seed)
        self._busy_until = -math.inf
        self._last_arrival = -math.inf

    def deliver(self, t_ms: float, nbytes: int) -> float:
        """Return the arrival time of the message (see class docstring)."""
        start = t_ms
        if self.bandwidth_mbps is not None:
            start = max(t_ms, self._busy_until)
            start += max(nbytes, 1) * 8.0 / (self.bandwidth_mbps * 1000.0)
            self._busy_until = start
        extra = 0.0
        if self.jitter_ms:
            extra += self._rng.uniform(0.0, self.jitter_ms)
        if self.loss:
            worst = 0
            for _ in range(max(1, math.ceil(nbytes / PACKET_BYTES))):
                tries = 0
                while tries < 16 and self._rng.random() < self.loss:
                    tries += 1
                worst = max(worst, tries)
            extra += worst * self.rto_ms
        arrival = max(start + self.delay_ms + extra, self._last_arrival)
        self._last_arrival = arrival
        return arrival

    def __repr__(self) -> str:
        return (f"FixedLink(delay_ms={self.delay_ms}, jitter_ms={self.jitter_ms}, "
                f"loss={self.loss}, seed={self.seed})")


def _read_trace(path: Path) -> tuple[int, ...]:
    problem = not_a_regular_file(path)
    if problem is not None:
        raise ValueError(f"{path}: trace file {problem}")
    data = path.read_bytes()
    try:
        out = tuple(map(int, data.split()))
    except ValueError as exc:
        raise ValueError(f"{path}: not an integer trace: {exc}") from exc
    if any(v < 0 for v in out[:1]) or any(b < a for a, b in itertools.pairwise(out)):
        raise ValueError(f"{path}: timestamps must be >= 0 and non-decreasing")
    if not out or out[-1] <= 0:
        raise ValueError(f"{path}: a trace needs at least one timestamp > 0")
    return out


_TRACE_CACHE: dict[str, tuple[int, ...]] = {}
_VALIDATED: set[int] = set()  # ids of the (immortal) cached tuples above


class TraceLink:
    """Trace-driven capacity with Mahimahi ``mm-link`` semantics, plus base delay.

    Each trace timestamp is one opportunity to deliver :data:`PACKET_BYTES` bytes. A
    message of ``n`` payload bytes occupies :func:`wire_bytes` ``(n)`` bytes (one IPv4/TCP
    header per segment) and is served FIFO as a byte stream, as ``LinkQueue::rationalize``
    does: it may use the bytes an opportunity has left after the packets queued before it,
    continues into later opportunities, and arrives at the opportunity that carries its
    last byte, plus ``base_delay_ms``. An opportunity serves only packets queued before it:
    a message sent at ``t`` uses opportunities later than ``floor(t)`` (mm-link burns the
    opportunities of the current millisecond before it enqueues); a time within 1e-9 ms
    below a whole millisecond counts as that millisecond (float noise of virtual time).
    Unused opportunities are lost (an idle link does not bank capacity). The trace repeats
    with period = its last timestamp.

    Call :meth:`deliver` in send-time order (the virtual transports send each message
    when virtual time reaches it); a call with an earlier send time than a previous one
    queues behind it.

    Args:
        opportunities: non-decreasing delivery-opportunity times in ms (trace time).
        offset_ms: trace time that corresponds to link time 0 (replay start offset).
        base_delay_ms: one-way propagation delay in ms.
        name: label for reports.

    Raises:
        ValueError: an empty or decreasing trace, or a negative offset or delay.
    """

    def __init__(self, opportunities: tuple[int, ...] | list[int], *, offset_ms: float = 0.0,
                 base_delay_ms: float = DEFAULT_BASE_DELAY_MS, name: str = "trace") -> None:
        if isinstance(opportunities, tuple) and id(opportunities) in _VALIDATED:
            ops = opportunities  # a cached trace file, already checked
        else:
            ops = tuple(int(x) for x in opportunities)
            if not ops or ops[-1] <= 0 or any(b < a for a, b in itertools.pairwise(ops)):
                raise ValueError("a trace needs non-decreasing timestamps ending above 0")
        if offset_ms < 0 or base_delay_ms < 0:
            raise ValueError("offset_ms and base_delay_ms must be >= 0")
        self._ops = ops
        self._n = len(ops)
        self.period_ms = ops[-1]
        self.offset_ms = float(offset_ms)
        self.base_delay_ms = float(base_delay_ms)
        self.name = name
        self._cursor = -1  # absolute index of the opportunity carrying the queue's last byte
        self._left = 0     # bytes that opportunity still has free

    @classmethod
    def from_file(cls, path: str | os.PathLike[str], offset_ms: float = 0.0,
                  base_delay_ms: float = DEFAULT_BASE_DELAY_MS) -> TraceLink:
        """Load a Mahimahi trace file (parsed once per process, then cached).

        Raises:
            FileNotFoundError: no such file.
            ValueError: not a regular file (a FIFO or device is refused without being
                opened), or a line is not a non-negative, non-decreasing integer.
        """
        p = Path(path)
        key = str(p.resolve())
        ops = _TRACE_CACHE.get(key)
        if ops is None:
            ops = _read_trace(p)
            _TRACE_CACHE[key] = ops
            _VALIDATED.add(id(ops))
        return cls(ops, offset_ms=offset_ms, base_delay_ms=base_delay_ms, name=p.name)

    def _time_of(self, i: int) -> float:
        loop, j = divmod(i, self._n)
        return float(loop * self.period_ms + self._ops[j])

    def _first_after(self, tau: float) -> int:
        """Absolute index of the first opportunity later than ``floor(tau)``."""
        ms = math.floor(tau + 1e-9)
        loop = max(0, ms // self.period_ms)
        rem = ms - loop * self.period_ms
        j = bisect.bisect_right(self._ops, rem)
        if j >= self._n:
            loop += 1
            j = 0
        return int(loop) * self._n + j

    def deliver(self, t_ms: float, nbytes: int) -> float:
        """Return the arrival time of the message (see class docstring).

        Raises:
            ValueError: ``nbytes`` < 0.
        """
        need = wire_bytes(nbytes)
        first = self._first_after(t_ms + self.offset_ms)
        if self._cursor < first:
            idx, left = first, PACKET_BYTES             # the queue has drained by then
        elif self._left > 0:
            idx, left = self._cursor, self._left        # share the tail's opportunity
        else:
            idx, left = self._cursor + 1, PACKET_BYTES  # queue behind the tail
        if need > left:
            extra = need - left
            idx += -(-extra // PACKET_BYTES)
            left = (-extra) % PACKET_BYTES
        else:
            left -= need
        self._cursor, self._left = idx, left
        return self._time_of(idx) - self.offset_ms + self.base_delay_ms

    def reset(self) -> None:
        """Forget queue state (every opportunity is free again)."""
        self._cursor = -1
        self._left = 0

    @property
    def mean_mbps(self) -> float:
        """Mean capacity of the trace in Mbit/s."""
        return self._n * PACKET_BYTES * 8 / (self.period_ms / 1000.0) / 1e6

    def __repr__(self) -> str:
        return (f"TraceLink({self.name!r}, offset_ms={self.offset_ms}, "
                f"base_delay_ms={self.base_delay_ms})")


def traces_dir() -> Path:
    """Return the folder holding the Mahimahi traces.

    ``$ICORE_TRACES`` when set, else ``traces/`` under :func:`icore._data.shared_data_dir`.

    Raises:
        FileNotFoundError: no such folder (names where it looked).
    """
    env = os.environ.get("ICORE_TRACES")
    if env:
        return Path(env)
    try:
        folder = shared_data_dir() / "traces"
    except IcoreError as exc:
        raise FileNotFoundError(f"Mahimahi traces not found; set ICORE_TRACES ({exc})") from exc
    if not folder.is_dir():
        raise FileNotFoundError(f"Mahimahi traces not found in {folder}; set ICORE_TRACES")
    return folder


def default_att_trace(direction: str = "up") -> Path:
    """Return the path of the default AT&T trace file (``ATT-LTE-driving.<direction>``).

    Why this file: the paper names "AT&T, T-Mobile and Verizon LTE" traces without a
    year; ``ATT-LTE-driving`` is the AT&T member of the same Sprout-evaluation set as the
    T-Mobile and Verizon ``*-LTE-driving`` files and the trace most Mahimahi-based papers
    mean by "the AT&T LTE trace". Use ``link_by_name("att-2016")`` for the 2016 one.
    """
    if direction not in ("up", "down"):
        raise ValueError("direction must be 'up' or 'down'")
    return traces_dir() / f"ATT-LTE-driving.{direction}"


@dataclass(frozen=True, slots=True)
class LinkPair:
    """Both directions of a client-owner path.

    Attributes:
        up: client -> owner (requests); the ``.up`` trace for trace links.
        down: owner -> client (replies); the ``.down`` trace for trace links.
        name: label.
    """

    up: Link
    down: Link
    name: str = "custom"


def link_by_name(name: str, *, direction: str = "up", offset_ms: float = 0.0,
                 base_delay_ms: float = DEFAULT_BASE_DELAY_MS) -> Link:
    """Return a fresh link by name.

    Names: ``loopback``, ``att``, ``att-2016``, ``tmobile``, ``verizon``; a trace link is
    one direction of the trace pair (``direction`` is ``up`` or ``down``).

    Raises:
        ValueError: unknown name or direction.
        FileNotFoundError: the traces folder is missing.
    """
    if name == "loopback":
        return Loopback()
    if name not in TRACE_FILES:
        raise ValueError(f"unknown link {name!r}; expected one of {LINK_NAMES}")
    if direction not in ("up", "down"):
        raise ValueError("direction must be 'up' or 'down'")
    fname = TRACE_FILES[name][0 if direction == "up" else 1]
    return TraceLink.from_file(traces_dir() / fname, offset_ms=offset_ms,
                               base_delay_ms=base_delay_ms)


def path_by_name(name: str, *, offset_ms: float = 0.0,
                 base_delay_ms: float = DEFAULT_BASE_DELAY_MS) -> LinkPair:
    """Return fresh uplink and downlink for a named path (see :func:`link_by_name`)."""
    return LinkPair(
        up=link_by_name(name, direction="up", offset_ms=offset_ms, base_delay_ms=base_delay_ms),
        down=link_by_name(name, direction="down", offset_ms=offset_ms,
                          base_delay_ms=base_delay_ms),
        name=name,
    )
