"""The one invalid-action verdict: did an executed action run from a stale plan?

An action is lineage-valid when, at the point it ran, the frontier its plan was built
from equals the owners' heads on every key of its dependency scope: ``F_a(x) == H(x)``
for every ``x`` in ``D(a)`` (planfence Sec. 3, eq. 1; Def. 1). Every place that
judges an executed action (the paper replay's ground truth, a live run's ground truth,
the audit of a recorded run and the CLI's ``--fail-on invalid``) asks
:func:`judge_action` and, for a recorded decision, :func:`action_status`.

Pure: no I/O, no clock.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from icore.records import RecordId


class KeyCheck(enum.StrEnum):
    """How one key of ``D(a)`` compares: the plan's ``F_a(x)`` against the head ``H(x)``."""

    CURRENT = "current"
    """``F_a(x) == H(x)``: the plan was built from the owner's head."""
    STALE = "stale"
    """``F_a(x) != H(x)``: the owner revised the key after the plan read it."""
    UNKNOWN = "unknown"
    """``F_a(x)`` or ``H(x)`` is not known (not read, not recorded, no head yet)."""


@dataclass(frozen=True, slots=True)
class ActionVerdict:
    """The per-key comparison of one action's frontier with the owners' heads.

    Attributes:
        keys: ``(key, KeyCheck)`` for every key of ``D(a)``, in the order of ``deps``.
        lineage_ok: False when the frontier could not be read at all (a lineage error:
            missing parent or boundary, frontier conflict); every key is then UNKNOWN.
    """

    keys: tuple[tuple[str, KeyCheck], ...]
    lineage_ok: bool

    @property
    def stale(self) -> tuple[str, ...]:
        """The keys whose ``F_a(x)`` and ``H(x)`` are both known and differ, in deps order."""
        return tuple(k for k, c in self.keys if c is KeyCheck.STALE)

    def invalid(self, *, ground_truth: bool) -> bool:
        """True when the action ran from a stale (or unprovable) plan.

        Args:
            ground_truth: True when every ``H(x)`` was read at the action's point (a
                replay's or live run's ground truth): any key not CURRENT, or a frontier
                that could not be read, is invalid. False for a recorded decision, where
                ``H(x)`` is known only for the keys the policy asked: only a STALE key
                is invalid.

        Returns:
            Whether the action is lineage-invalid.
        """
        if ground_truth:
            return not self.lineage_ok or any(c is not KeyCheck.CURRENT for _, c in self.keys)
        return any(c is KeyCheck.STALE for _, c in self.keys)


def judge_action(deps: Sequence[str], frontier: Mapping[str, RecordId] | None,
                 heads: Mapping[str, RecordId | None]) -> ActionVerdict:
    """Compare an action's frontier with the owners' heads, key by key (planfence eq. 1).

    Args:
        deps: the dependency scope ``D(a)`` (semantic keys, in the caller's order).
        frontier: ``F_a(x)`` per key (key -> record id); None when the frontier could not
            be computed (a lineage error), which makes every key UNKNOWN and
            ``lineage_ok`` False.
        heads: ``H(x)`` per key (key -> record id, or None when the key has no head).

    Returns:
        The :class:`ActionVerdict`: per key UNKNOWN when ``F_a(x)`` or ``H(x)`` is
        missing, STALE when they differ, CURRENT when they are equal.
    """
    if frontier is None:
        return ActionVerdict(tuple((k, KeyCheck.UNKNOWN) for k in deps), False)
    out = []
    for k in deps:
        f, h = frontier.get(k), heads.get(k)
        if f is None or h is None:
            out.append((k, KeyCheck.UNKNOWN))
        else:
            out.append((k, KeyCheck.STALE if f != h else KeyCheck.CURRENT))
    return ActionVerdict(tuple(out), True)


NOT_ISSUED = "not issued"
"""Status of an action the gate was never asked about."""
BLOCKED = "blocked"
"""Status of an action whose last decision did not authorize it (fail closed)."""
INVALID = "INVALID"
"""Status of an authorized action whose plan was stale (``F_a(x) != H(x)``)."""
UNCHECKED = "unchecked"
"""Status of an authorized action with dependencies but no frontier to check."""
VALID = "valid"
"""Status of an authorized action with no stale key."""


def action_status(authorized: bool | None, verdict: ActionVerdict, *,
                  frontier_known: bool) -> str:
    """The status of a recorded action from its last gate decision.

    Args:
        authorized: whether the last decision authorized the action; None when the gate
            was never asked.
        verdict: :func:`judge_action` of the last decision (``F_a(x)`` as recorded or as
            the roots cite it, ``H(x)`` as the owners reported it).
        frontier_known: False when no frontier could be read at all (neither recorded by
            the gate nor cited by the plan's records).

    Returns:
        ``"not issued"``, ``"blocked"``, ``"INVALID"`` (authorized with a stale key),
        ``"unchecked"`` (authorized, dependencies but no frontier) or ``"valid"``.
    """
    if authorized is None:
        return NOT_ISSUED
    if not authorized:
        return BLOCKED
    if verdict.invalid(ground_truth=False):
        return INVALID
    if not frontier_known and verdict.keys:
        return UNCHECKED
    return VALID


def action_ran(status: str) -> bool:
    """Whether an action with this :func:`action_status` ran (last decision authorized).

    ``valid``, ``INVALID`` or ``unchecked``: it ran; a ``blocked`` or ``not issued``
    action never ran, whatever records it left behind (a refused call's action record
    included).
    """
    return status in (VALID, INVALID, UNCHECKED)


__all__ = ["ActionVerdict", "KeyCheck", "action_ran", "action_status", "judge_action"]
