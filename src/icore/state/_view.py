"""A read-only view of X = (G, Q, Π) (icore Sec. 3; design.md 4.2, 4.3).

:class:`StateView` is what the modules below :class:`~icore.state.State` type against:
the interfaces of I_D, :func:`~icore.state.normalize`, :func:`~icore.state.full_metrics`
and Definition 6 (:func:`~icore.state.audit`) read X only through it, so none of them
imports the state (no import circle) and none can change X. :class:`State` implements it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Protocol

from icore._clock import Clock
from icore.state._components import (
    AgentDecl,
    DiagnosisLike,
    ObservableType,
    OperationDecl,
    Parameters,
    Transition,
    ValidatorSpec,
)
from icore.state._entries import FlagResolved
from icore.state._metrics import MatchedSet, Metrics
from icore.state._xmodel import (
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


class InterfacesLike(Protocol):
    """I_D as X's readers call it (:class:`~icore.state.Interfaces` implements it)."""

    @property
    def value(self) -> Callable[[AgentDecl, Obligation], float]:
        """The value of an agent for an obligation, in [0, 1]."""
        ...

    @property
    def weight(self) -> Callable[[Obligation], float]:
        """The weight of an obligation (finite, >= 0)."""
        ...

    @property
    def feasible(self) -> Callable[[AgentDecl, Obligation], bool]:
        """Whether an agent may take an obligation."""
        ...

    @property
    def local_view(self) -> Callable[[str, StateView], JSON]:
        """What an agent is shown of X (JSON)."""
        ...

    @property
    def normalize(self) -> Callable[[StateView], JSON]:
        """The canonical JSON form of X."""
        ...

    @property
    def terminal(self) -> Callable[[StateView], bool]:
        """D's terminal predicate on X."""
        ...

    @property
    def progress(self) -> Callable[[Transition], bool]:
        """Whether a committed transition is progress."""
        ...

    @property
    def responsible(self) -> Callable[[StateView, DiagnosisLike], str | None]:
        """D's routing rule for a diagnosis F."""
        ...

    @property
    def assignment_authority(self) -> Callable[[StateView], tuple[str, ...]]:
        """The agents D authorizes to revise assignments."""
        ...


class DeclarationLike(Protocol):
    """D as X's readers see it (:class:`~icore.state.DeclarationPackage` implements it).

    Defined here so the view does not import the package module (which imports the
    interfaces, which read X through this view: no import circle, not even of types).
    """

    @property
    def name(self) -> str:
        """Package name."""
        ...

    @property
    def version(self) -> str:
        """Package version."""
        ...

    @property
    def file(self) -> str:
        """Where D came from (error messages)."""
        ...

    @property
    def observables(self) -> Mapping[str, ObservableType]:
        """O_D."""
        ...

    @property
    def agents(self) -> Mapping[str, AgentDecl]:
        """M_D."""
        ...

    @property
    def operations(self) -> Mapping[str, OperationDecl]:
        """Ω."""
        ...

    @property
    def validators(self) -> Mapping[str, ValidatorSpec]:
        """V."""
        ...

    @property
    def interfaces(self) -> InterfacesLike:
        """I_D."""
        ...

    @property
    def parameters(self) -> Parameters:
        """ε, H, τ and the Prop. 4 declaration."""
        ...

    def effect_kinds(self, operation: str) -> frozenset[AssertionKind]:
        """Assertion kinds ``operation`` declares effects of (empty if undeclared)."""
        ...

    def may_propose(self, agent: str, operation: str) -> bool:
        """True if ``agent`` is declared and authorized to propose ``operation``."""
        ...

    def fingerprint(self) -> str:
        """A digest of D (what a log was written under)."""
        ...


class StateView(Protocol):
    """Read access to X: G, Q, Π, flags, proposals, soundness, stability and metrics.

    Every member is a query: nothing here changes X. Mappings are read-only views.
    """

    @property
    def decl(self) -> DeclarationLike:
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
