"""Metrics snd, astab, cq, aggregate reassignment gain, Prop. 4 bound (design.md 4.3).

Sums are exact: every float is a dyadic rational n / 2**k, so X's sums are kept as
integers over a power of two and summed with Python's exact integer arithmetic; ratios
use int/int true division, which is correctly rounded. So the incremental metrics and a
full recompute agree exactly, not just approximately. The sums X keeps
(:class:`MetricSums`) use the finest power of two their terms need so far (weights of
1.0 or 0.5 keep them small integers); :func:`fixed` is the one fixed scale 2**SCALE_BITS
that holds any float (the matched-set sums). Both give the same rationals, so the same
floats.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from icore.state._components import Parameters


SCALE_BITS = 1100
"""Fixed-point scale of :func:`fixed`: any finite float times 2**SCALE_BITS is an integer."""


def fixed(value: float) -> int:
    """``value`` as an exact integer multiple of 2**-SCALE_BITS."""
    n, d = value.as_integer_ratio()
    return n << (SCALE_BITS - (d.bit_length() - 1))


def dyadic(value: float) -> tuple[int, int]:
    """``(n, k)`` with ``value == n / 2**k`` exactly and ``k >= 0`` (finite floats)."""
    n, d = value.as_integer_ratio()
    return n, d.bit_length() - 1


@dataclass(frozen=True, slots=True)
class ObligationEval:
    """One obligation's contribution: in W, weight, sound, ε-stable, gain (Def. 9).

    ``weight`` is the checked weight w(o) and ``gain`` the float gain; the sums add
    them exactly (:class:`MetricSums`: w, and w·max(0, gain) as the exact product).
    Frozen, so equal evaluations may share one object.
    """

    in_w: bool
    weight: float
    sound: bool
    stable: bool
    gain: float


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
    w: int, sound_w: int, stable_w: int, gain_w: int, n: int, p: Parameters, *,
    scale: int = SCALE_BITS, gain_scale: int = 2 * SCALE_BITS,
) -> Metrics:
    """Build :class:`Metrics` from exact sums.

    Weights are integers over 2**``scale``, gains over 2**``gain_scale`` (default: the
    fixed point of :func:`fixed`, gains as products of two fixed-point numbers). Every
    figure is an exact rational rounded once (int/int true division), so it does not
    depend on the scale the sums were kept at.
    """
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
        aggregate_gain=gain_w / (1 << gain_scale),
        total_weight=w / (1 << scale),
        evaluated=n,
        epsilon=p.epsilon,
        frechet=frechet,
        performance_bound=bound,
        sound_weight=sound_w / (1 << scale),
        stable_weight=stable_w / (1 << scale),
    )


class MetricSums:
    """The exact sums over W behind :class:`Metrics` (design.md 4.3, 4.4).

    Integers over a power of two (weight, sound and stable weight over 2**``scale``;
    the weighted gains, exact products w·gain, over 2**``gain_scale``), so adding and
    removing obligation evaluations in any order gives exactly the full recompute: X
    keeps one instance and updates it per touched obligation (``remove`` the old
    evaluation, ``add`` the new). A term finer than the current scale raises it (the
    sums are shifted, which is exact), so the integers stay as small as the terms allow.
    :meth:`metrics` is O(1) and returns the same object until the sums change.
    """

    __slots__ = ("_cache", "count", "gain", "gain_scale", "scale", "sound", "stable",
                 "weight")

    def __init__(self) -> None:
        self.weight = 0
        self.sound = 0
        self.stable = 0
        self.gain = 0
        self.count = 0
        self.scale = 0
        self.gain_scale = 0
        self._cache: tuple[Parameters, Metrics] | None = None

    def _terms(self, ev: ObligationEval) -> tuple[int, int]:
        """``ev``'s weight at ``scale`` and weighted gain at ``gain_scale`` (rescaling)."""
        n, k = dyadic(ev.weight)
        if k > self.scale:
            up = k - self.scale
            self.weight <<= up
            self.sound <<= up
            self.stable <<= up
            self.scale = k
        w = n << (self.scale - k)
        if not ev.gain > 0:
            return w, 0
        gn, gk = dyadic(ev.gain)
        gn, gk = n * gn, k + gk
        if gk > self.gain_scale:
            self.gain <<= gk - self.gain_scale
            self.gain_scale = gk
        return w, gn << (self.gain_scale - gk)

    def add(self, ev: ObligationEval) -> None:
        """Count ``ev`` (no-op unless it is in W)."""
        if ev.in_w:
            self._cache = None
            w, g = self._terms(ev)
            self.weight += w
            self.count += 1
            if ev.sound:
                self.sound += w
            if ev.stable:
                self.stable += w
            self.gain += g

    def remove(self, ev: ObligationEval) -> None:
        """Uncount ``ev`` (no-op unless it is in W)."""
        if ev.in_w:
            self._cache = None
            w, g = self._terms(ev)
            self.weight -= w
            self.count -= 1
            if ev.sound:
                self.sound -= w
            if ev.stable:
                self.stable -= w
            self.gain -= g

    def save(self) -> tuple[int, ...]:
        """The sums and their scales, to :meth:`restore` later (a trial)."""
        return (self.weight, self.sound, self.stable, self.gain, self.count, self.scale,
                self.gain_scale)

    def restore(self, saved: tuple[int, ...]) -> None:
        """Put back sums from :meth:`save`."""
        (self.weight, self.sound, self.stable, self.gain, self.count, self.scale,
         self.gain_scale) = saved
        self._cache = None

    def metrics(self, p: Parameters) -> Metrics:
        """:class:`Metrics` from the sums under ``p`` (cached while they are unchanged)."""
        c = self._cache
        if c is not None and c[0] is p:
            return c[1]
        m = make_metrics(self.weight, self.sound, self.stable, self.gain, self.count, p,
                         scale=self.scale, gain_scale=self.gain_scale)
        self._cache = (p, m)
        return m
