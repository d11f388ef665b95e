"""The report's view model: plain frozen data, ready to render (style habit 13).

The report layer renders these objects and computes nothing about the run: every number
and status here was computed upstream (``icore.state`` metrics, ``icore.adapters``
diagnoses and attribution). A live run (issue 8) builds the same :class:`RunView` from
its own X and calls :func:`icore.report.render_report`.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class MetricPointView:
    """One point of the cq timeline: the step and X's snd, astab, cq after it."""

    step: int
    snd: float
    astab: float
    cq: float


@dataclass(frozen=True, slots=True)
class EventView:
    """A node of G.

    Attributes:
        id: event id (also the HTML anchor ``ev-<id>``).
        step: source step, or None for synthetic events.
        type: observable type.
        kind: ``action`` or ``artifact``.
        agent: acting agent.
        excerpt: the start of the message text (shown as is, escaped).
        facts: short ``key=value`` facts the importer extracted.
        causes: ids of the events it depends on.
    """

    id: str
    step: int | None
    type: str
    kind: str
    agent: str
    excerpt: str = ""
    facts: str = ""
    causes: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class CertificateView:
    """A certificate in Π: validator, verdict, active, the events it checked."""

    id: str
    validator: str
    verdict: bool
    active: bool
    events: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class AssertionView:
    """An assertion of Q with its justification in Π (the evidence behind it).

    Attributes:
        id: assertion id (anchor ``as-<id>``).
        obligation: the obligation it is about.
        kind: assertion kind; ``key`` its slot key.
        value: the asserted value, as display text.
        proposer: who asserted it.
        operation: the declared operation it instantiates.
        active: not superseded.
        sound: its justification holds (design.md 4.3).
        events: cited event ids (evidence in G).
        certificates: cited certificates.
    """

    id: str
    obligation: str
    kind: str
    key: str
    value: str
    proposer: str | None
    operation: str | None
    active: bool
    sound: bool
    events: tuple[str, ...] = ()
    certificates: tuple[CertificateView, ...] = ()


@dataclass(frozen=True, slots=True)
class ObligationView:
    """A node of Q for the obligation graph.

    Attributes:
        id: obligation id (anchor ``ob-<id>``).
        kind: work kind.
        status: effective status.
        assignee: current assignee.
        parent: parent obligation (graph edge).
        deps: dependencies (dashed edges).
        relations: ``(name, other)`` relations (e.g. ``transported_to``; dotted edges).
        weight: weight.
        sound: every decision-relevant assertion is sound.
        stable: ε-stable.
        in_w: counted in W(X).
    """

    id: str
    kind: str
    status: str
    assignee: str | None
    parent: str | None
    weight: float
    sound: bool
    stable: bool
    in_w: bool = True
    deps: tuple[str, ...] = ()
    relations: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class DiagnosisView:
    """A diagnosis, linked to the events, assertions and obligations it cites."""

    id: str
    defect: str
    step: int | None
    responsible: str | None
    detail: str
    events: tuple[str, ...] = ()
    assertions: tuple[str, ...] = ()
    obligations: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class ChainLinkView:
    """One link of an attribution's chain of evidence."""

    diagnosis: str
    defect: str
    step: int | None
    agent: str | None
    detail: str


@dataclass(frozen=True, slots=True)
class CandidateView:
    """One ranked (agent, step) candidate and the features that ranked it
    (``(feature, value, contribution)`` strings)."""

    agent: str
    step: int
    score: str
    reasons: tuple[tuple[str, str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class AttributionView:
    """Predicted responsible agent and step, the chain, the top candidates, and the
    annotation if known."""

    agent: str | None
    step: int | None
    rule: str
    chain: tuple[ChainLinkView, ...] = ()
    true_agent: str | None = None
    true_step: int | None = None
    candidates: tuple[CandidateView, ...] = ()
    model: str = ""


@dataclass(frozen=True, slots=True)
class FlagView:
    """A hard flag."""

    id: str
    kind: str
    detail: str
    assertions: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class RunView:
    """Everything one run's report shows.

    Attributes:
        id: run id (the report file is ``<id>.html``).
        title: page title.
        subtitle: one line under the title (source, family, question).
        summary: ``(label, value)`` pairs shown as a table.
        timeline: the cq timeline.
        obligations: Q for the obligation graph.
        assertions: Q's assertions with their evidence.
        events: G.
        diagnoses: diagnoses.
        flags: hard flags.
        attribution: failure attribution, if computed.
        links: ``(label, href)`` pairs (relative links, e.g. the PROV-JSON file).
        index_href: relative link to the index page, if one is written next to it.
    """

    id: str
    title: str
    subtitle: str = ""
    summary: tuple[tuple[str, str], ...] = ()
    timeline: tuple[MetricPointView, ...] = ()
    obligations: tuple[ObligationView, ...] = ()
    assertions: tuple[AssertionView, ...] = ()
    events: tuple[EventView, ...] = ()
    diagnoses: tuple[DiagnosisView, ...] = ()
    flags: tuple[FlagView, ...] = ()
    attribution: AttributionView | None = None
    links: tuple[tuple[str, str], ...] = ()
    index_href: str | None = None


@dataclass(frozen=True, slots=True)
class IndexRow:
    """One row of the index: the run's id, its report file, and display cells."""

    id: str
    href: str
    cells: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class IndexView:
    """The index page: a table of runs plus ``(label, value)`` notes (e.g. accuracy)."""

    title: str
    columns: tuple[str, ...]
    rows: tuple[IndexRow, ...]
    notes: tuple[tuple[str, str], ...] = field(default_factory=tuple)
    errors: tuple[tuple[str, str], ...] = field(default_factory=tuple)


__all__ = [
    "AssertionView",
    "AttributionView",
    "CandidateView",
    "CertificateView",
    "ChainLinkView",
    "DiagnosisView",
    "EventView",
    "FlagView",
    "IndexRow",
    "IndexView",
    "MetricPointView",
    "ObligationView",
    "RunView",
]
