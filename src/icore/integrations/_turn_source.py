"""A workspace agent's turn source, installed by a framework integration (#28).

A read is stamped with the model turn it belongs to (``Agent.turn_source``); an
integration installs its own source once per agent, whatever number of tools it wraps,
and keeps a source the application set, asked when the framework knows no turn.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any

TurnSource = Callable[[], Hashable | None]
"""A function naming the current model turn (None: none known)."""


def install_turn_source(team: Any, source: TurnSource, marker: str) -> None:
    """Make ``source`` ``team``'s turn source; idempotent per integration (``marker``).

    A source installed before by the same integration (``source`` itself, or one chained
    under the attribute ``marker``) is replaced; any other (the application's) is kept
    and asked when ``source`` names no turn.
    """
    prev = team.turn_source
    if prev is None or prev is source or getattr(prev, marker, False):
        team.turn_source = source
        return
    other = prev

    def either() -> Hashable | None:
        got = source()
        return got if got is not None else other()

    setattr(either, marker, True)
    team.turn_source = either
