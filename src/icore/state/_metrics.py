"""Metrics snd, astab, cq, aggregate reassignment gain, Prop. 4 bound (design.md 4.3).

Sums are exact: every float is a dyadic rational, so weights are kept as integers scaled
by 2**SCALE_BITS (gains times weights by 2**(2*SCALE_BITS)) and summed with Python's
exact integer arithmetic; ratios use int/int true division, which is correctly rounded.
So the incremental metrics and a full recompute agree exactly, not just approximately.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from icore.state._components import Parameters


SCALE_BITS = 1100
"""Fixed-point scale: any finite float times 2**SCALE_BITS is an integer."""
_ONE = 1 << SCALE_BITS


def fixed(value: float) -> int:
    """``value`` as an exact integer multiple of 2**-SCALE_BITS."""
    n, d = value.as_integer_ratio()
    return n << (SCALE_BITS - (d.bit_length() - 1))


@dataclass(frozen=True, slots=True)
class ObligationEval:
    """One obligation's contribution: in W, weight, sound, ε-stable, gain (Def. 9).

    ``weight`` is fixed-point (scale 2**SCALE_BITS); ``weighted_gain`` is
    w·max(0, gain) at scale 2**(2·SCALE_BITS); ``gain`` is the float gain.
    """

    in_w: bool
    weight: int
    sound: bool
    stable: bool
    gain: float
    weighted_gain: int


@dataclass(frozen=True, slots=True)
class MatchedSet:
    """A frozen matched audit set W_F with the weights at freeze time (icore Sec. 4).

    Attributes:
        obligations: obligation ids, in freeze order.
        weights: their weights when frozen (same length).
    """

    obligations: tuple[str, ...]
    weights: tuple[float, ...]


@dataclass(frozen=True, slots=True)
class Metrics:
    """iCORE-state quality over W (design.md 4.3).

    Attributes:
        snd: weighted share of W whose decision-relevant assertions are all sound.
        astab: weighted share of W that is ε-stable (icore Def. 9).
        cq: (snd + astab) / 2.
        aggregate_gain: Σ w(o)·max(0, gain(o)) over W.
        total_weight: Σ w(o) over W.
        evaluated: |W|.
        epsilon: ε used.
        frechet: max(0, snd + astab − 1), the share both sound and stable at least.
        performance_bound: p_min·max(0, 2·cq − 1) when D declares the Prop. 4
            conditions, else None (cq is then a process diagnostic).
        sound_weight: Σ w over sound obligations.
        stable_weight: Σ w over stable obligations.

    With total weight 0, snd and astab are 1.0 (vacuously satisfied).
    """

    snd: float
    astab: float
    cq: float
    aggregate_gain: float
    total_weight: float
    evaluated: int
    epsilon: float
    frechet: float
    performance_bound: float | None
    sound_weight: float
    stable_weight: float

    @property
    def gain_bound(self) -> float:
        """ε·Σw: the aggregate gain bound when every component is stable."""
        return self.epsilon * self.total_weight


def make_metrics(
    w: int, sound_w: int, stable_w: int, gain_w: int, n: int, p: Parameters
) -> Metrics:
    """Build :class:`Metrics` from exact fixed-point sums (see :func:`fixed`)."""
    if w > 0:
        snd = sound_w / w
        astab = stable_w / w
        cq = (sound_w + stable_w) / (2 * w)
        frechet = max(0.0, (sound_w + stable_w - w) / w)
    else:
        snd = astab = cq = 1.0
        frechet = 1.0
    bound = None
    if p.bound_declared and p.p_min is not None:
        bound = p.p_min * max(0.0, 2 * cq - 1)
    return Metrics(
        snd=snd,
        astab=astab,
        cq=cq,
        aggregate_gain=gain_w / (_ONE * _ONE),
        total_weight=w / _ONE,
        evaluated=n,
        epsilon=p.epsilon,
        frechet=frechet,
        performance_bound=bound,
        sound_weight=sound_w / _ONE,
        stable_weight=stable_w / _ONE,
    )


class MetricSums:
    """The exact fixed-point sums over W behind :class:`Metrics` (design.md 4.3, 4.4).

    Integers (see :func:`fixed`), so adding and removing obligation evaluations in any
    order gives exactly the full recompute: X keeps one instance and updates it per
    touched obligation (``remove`` the old evaluation, ``add`` the new).
    :meth:`metrics` is O(1) and returns the same object until the sums change.
    """

    __slots__ = ("_cache", "count", "gain", "sound", "stable", "weight")

    def __init__(self) -> None:
        self.weight = 0
        self.sound = 0
        self.stable = 0
        self.gain = 0
        self.count = 0
        self._cache: tuple[Parameters, Metrics] | None = None

    def add(self, ev: ObligationEval) -> None:
        """Count ``ev`` (no-op unless it is in W)."""
        if ev.in_w:
            self._cache = None
            self.weight += ev.weight
            self.count += 1
            if ev.sound:
                self.sound += ev.weight
            if ev.stable:
                self.stable += ev.weight
            self.gain += ev.weighted_gain

    def remove(self, ev: ObligationEval) -> None:
        """Uncount ``ev`` (no-op unless it is in W)."""
        if ev.in_w:
            self._cache = None
            self.weight -= ev.weight
            self.count -= 1
            if ev.sound:
                self.sound -= ev.weight
            if ev.stable:
                self.stable -= ev.weight
            self.gain -= ev.weighted_gain

    def save(self) -> tuple[int, int, int, int, int]:
        """The sums, to :meth:`restore` later (a trial)."""
        return (self.weight, self.sound, self.stable, self.gain, self.count)

    def restore(self, saved: tuple[int, int, int, int, int]) -> None:
        """Put back sums from :meth:`save`."""
        self.weight, self.sound, self.stable, self.gain, self.count = saved
        self._cache = None

    def metrics(self, p: Parameters) -> Metrics:
        """:class:`Metrics` from the sums under ``p`` (cached while they are unchanged)."""
        c = self._cache
        if c is not None and c[0] is p:
            return c[1]
        m = make_metrics(self.weight, self.sound, self.stable, self.gain, self.count, p)
        self._cache = (p, m)
        return m
