"""A read-only view of X = (G, Q, Π) (icore Sec. 3; design.md 4.2, 4.3).

:class:`StateView` is what the modules below :class:`~icore.state.State` type against:
the interfaces of I_D, :func:`~icore.state.normalize`, :func:`~icore.state.full_metrics`
and Definition 6 (:func:`~icore.state.audit`) read X only through it, so none of them
imports the state (no import circle) and none can change X. :class:`State` implements it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Protocol

from icore._clock import Clock
from icore.state._entries import FlagResolved
from icore.state._model import (
    JSON,
    Assertion,
    AssertionKind,
    Certificate,
    Event,
    HardFlag,
    Justification,
    Obligation,
    Proposal,
)

if TYPE_CHECKING:  # typing only: the package imports its components, not the view
    from icore.state._metrics import MatchedSet, Metrics
    from icore.state._package import DeclarationPackage


class StateView(Protocol):
    """Read access to X: G, Q, Π, flags, proposals, soundness, stability and metrics.

    Every member is a query: nothing here changes X. Mappings are read-only views.
    """

    @property
    def decl(self) -> DeclarationPackage:
        """The declaration package D."""
        ...

    @property
    def clock(self) -> Clock:
        """The injected clock (event times)."""
        ...

    @property
    def seq(self) -> int:
        """Number of entries applied."""
        ...

    @property
    def events(self) -> Mapping[str, Event]:
        """G: event id -> event."""
        ...

    @property
    def obligations(self) -> Mapping[str, Obligation]:
        """Q's obligations: id -> obligation."""
        ...

    @property
    def assertions(self) -> Mapping[str, Assertion]:
        """Q's assertions, active and superseded."""
        ...

    @property
    def justifications(self) -> Mapping[str, Justification]:
        """Π: assertion id -> justification."""
        ...

    @property
    def certificates(self) -> Mapping[str, Certificate]:
        """Π's certificates."""
        ...

    @property
    def flags(self) -> Mapping[str, HardFlag]:
        """Every hard flag raised."""
        ...

    def proposal(self, proposal_id: str) -> Proposal | None:
        """The recorded proposal ``proposal_id``, if any."""
        ...

    def proposal_count(self) -> int:
        """Number of proposals recorded (committed or rejected)."""
        ...

    def has_proposal(self, proposal_id: str) -> bool:
        """True if a proposal with this id was recorded."""
        ...

    def flags_on(self, assertion_id: str) -> Iterable[str]:
        """Ids of the hard flags that name ``assertion_id``."""
        ...

    def flag_resolution(self, flag_id: str) -> FlagResolved | None:
        """How ``flag_id`` was resolved, or None while open."""
        ...

    def next_ids(self, prefix: str, count: int) -> list[str]:
        """The next ``count`` ids for ``a``/``c``/``f``."""
        ...

    def is_active(self, assertion_id: str) -> bool:
        """The assertion exists and is not superseded."""
        ...

    def superseded_by(self, assertion_id: str) -> str | None:
        """The assertion that superseded ``assertion_id``, if any."""
        ...

    def certificate_active(self, certificate_id: str) -> bool:
        """The certificate passed and was not revoked."""
        ...

    def active_assertion(
        self, obligation_id: str, kind: AssertionKind, key: str = ""
    ) -> Assertion | None:
        """The active assertion in a slot, if any."""
        ...

    def slot_values(self, assertions: Iterable[Assertion]) -> tuple[JSON, ...]:
        """The values the assertions' slots hold now."""
        ...

    def assertion_sound(self, assertion_id: str) -> bool:
        """Soundness of one assertion."""
        ...

    def is_sound(self, obligation_id: str) -> bool:
        """Soundness of one obligation."""
        ...

    def gain(self, obligation_id: str) -> float:
        """The gain of reassigning one obligation (icore Def. 9).

        This is gain(o) of Def. 9.
        """
        ...

    def terminal_default(self) -> bool:
        """The built-in terminal predicate."""
        ...

    def metrics(self, over: MatchedSet | None = None) -> Metrics:
        """snd, astab, cq over W(X) or a matched set."""
        ...

    def recompute_metrics(self) -> Metrics:
        """Full recompute of :meth:`metrics` over W(X)."""
        ...

    def children(self, obligation_id: str) -> Sequence[str]:
        """Obligations whose parent is ``obligation_id``."""
        ...
