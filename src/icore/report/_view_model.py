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
    """One ranked (agent, step) candidate and the features that ranked it.

    The features are ``(feature, value, contribution)`` strings.
    """

    agent: str
    step: int
    score: str
    reasons: tuple[tuple[str, str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class AttributionView:
    """Predicted responsible agent and step.

    With the chain, the top candidates, and the annotation if known.
    """

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
    """A hard flag with where it happened and what it cites.

    Attributes:
        id: flag id (anchor ``fl-<id>``).
        kind: flag kind.
        detail: explanation.
        assertions: affected assertion ids.
        obligations: affected obligation ids.
        agent: the proposer of the flagged attempt (None: an owner revision).
        step: where it was raised (source step of an imported run, proposal number of a
            live run), None when unknown.
        reasons: Definition 6 reasons (``code: detail``).
        records: cited PlanFence record ids (stale or revoked versions).
        resolved: the flag was resolved (e.g. by the replan).
    """

    id: str
    kind: str
    detail: str
    assertions: tuple[str, ...] = ()
    obligations: tuple[str, ...] = ()
    agent: str | None = None
    step: int | None = None
    reasons: tuple[str, ...] = ()
    records: tuple[str, ...] = ()
    resolved: bool = False


@dataclass(frozen=True, slots=True)
class RecordView:
    """A PlanFence record in a lineage picture (planfence Sec. 3).

    Attributes:
        id: record id (content address; anchor ``rec-<id>``).
        key: semantic key (``req/t1``).
        owner: owning agent.
        seq: owner sequence number (the version).
        type: record type.
        role: what it is in the workflow (requirement, revision, plan, replan, action...).
        parents: exact parent record ids.
        summary: short content text.
    """

    id: str
    key: str
    owner: str
    seq: int | None
    type: str
    role: str
    parents: tuple[str, ...] = ()
    summary: str = ""


@dataclass(frozen=True, slots=True)
class ValidationView:
    """One validation point of the gate (planfence Alg. 1): F(x) against H(x).

    Attributes:
        point: validation point number.
        outcome: ``authorized``, ``replan_required`` or ``blocked``.
        reason: the gate's reason (``fresh``, ``stale``, ``not_validated``...).
        policy: the validator's policy.
        replanned: this point validated the replanned action.
        roots: plan root record ids L(x).
        deps: dependency scope D(x).
        frontier: ``(key, record id)`` pairs of F(x).
        frontier_source: ``gate`` (computed by the gate) or ``plan parents`` (the policy
            computes no frontier; shown from the roots' exact parents).
        heads: ``(key, record id)`` pairs of the owners' heads H(x).
        stale: keys whose F(x) version is not the head.
        detail: the gate's detail text.
    """

    point: int
    outcome: str
    reason: str
    policy: str
    replanned: bool
    roots: tuple[str, ...] = ()
    deps: tuple[str, ...] = ()
    frontier: tuple[tuple[str, str], ...] = ()
    frontier_source: str = "gate"
    heads: tuple[tuple[str, str], ...] = ()
    stale: tuple[str, ...] = ()
    detail: str = ""


@dataclass(frozen=True, slots=True)
class DecisionStepView:
    """One step of the gate's decision timeline (validate -> replan -> validate -> ...).

    Attributes:
        kind: ``validate``, ``replan``, ``authorized``, ``blocked``, ``executed``...
        label: short text in the timeline box.
        status: ``ok``, ``bad`` or ``warn`` (colour).
        detail: tooltip / longer text.
    """

    kind: str
    label: str
    status: str
    detail: str = ""


@dataclass(frozen=True, slots=True)
class LineageView:
    """The lineage picture of one protected action (planfence Sec. 3-4, eq. 1).

    Attributes:
        id: anchor (``lin-<id>``).
        title: e.g. the task and action name.
        status: ``valid``, ``INVALID``, ``blocked``, ``not issued``.
        reason: one line: why it is invalid or blocked (or why it is valid).
        records: the records involved, in commit order.
        points: the gate's validation points.
        steps: the decision timeline.
        stale_by: ids of the revisions that made the plan stale.
        action: the action record id, if one was committed.
        roots: the plan records the action finally ran from (or would have).
        error: the tool's error when it failed after the gate authorized it (issue 28);
            ``status`` keeps the gate's lineage verdict.
        outcome_unknown: authorized, but the run ended abnormally with no result of the
            call recorded (``status`` keeps the gate's verdict; counted ``outcome
            unknown``).
        human: ``approved`` / ``rejected`` when a human answered the call
            (:attr:`icore.adapters.ActionLineage.human`), else None.
        human_step: the step of the human's recorded answer, when known.
        resent_unchanged: of a replan, the facts whose fresh value differs from the one
            the stale call was planned from although its arguments are the stale call's
            (:attr:`icore.adapters.ActionLineage.resent_unchanged`: a warning), else ``()``.
        args: the call's arguments as canonical JSON text, when recorded
            (:attr:`icore.adapters.ActionLineage.args`).
        caller: the agent that made the call, when recorded.
        branch: the parallel branch the call was made in, when recorded
            (:attr:`icore.adapters.ActionLineage.branch`).
        reissue_of: the earlier action whose outcome is unknown that this one repeats
            (same tool, arguments and versions: "reissued after an unknown outcome",
            :attr:`icore.adapters.ActionLineage.reissue_of`), else None.
        called_again: of a call refused ``not_read`` / ``stale``, the next call of its
            tool by its agent that ran and what it read
            (:attr:`icore.adapters.ActionLineage.called_again`), else None.
    """

    id: str
    title: str
    status: str
    reason: str
    records: tuple[RecordView, ...] = ()
    points: tuple[ValidationView, ...] = ()
    steps: tuple[DecisionStepView, ...] = ()
    stale_by: tuple[str, ...] = ()
    action: str | None = None
    roots: tuple[str, ...] = ()
    error: str | None = None
    outcome_unknown: bool = False
    human: str | None = None
    human_step: int | None = None
    resent_unchanged: tuple[str, ...] = ()
    args: str | None = None
    caller: str | None = None
    branch: str | None = None
    reissue_of: str | None = None
    called_again: str | None = None

    @property
    def counted(self) -> str:
        """What the counts file it under (:func:`icore.adapters.counted_as`)."""
        from icore.adapters import counted_as

        # outcome_unknown holds the recorded may_have_run (else the old text rule)
        return counted_as(self.status, self.error, unknown=self.outcome_unknown,
                          leaves_open=False)

    @property
    def ran(self) -> bool:
        """Whether the action ran (:func:`icore.fence.action_ran` of its status).

        A refused (``blocked``) call never did, even when its action record exists.
        """
        from icore.fence import action_ran

        return action_ran(self.status)


@dataclass(frozen=True, slots=True)
class NoticeView:
    """A line shown at the top of a page (the reason of an invalid or blocked action)."""

    level: str
    text: str
    href: str | None = None


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
        lineage: lineage pictures of protected actions (live runs; traces carrying
            PlanFence records).
        notices: lines shown at the top (e.g. why an action was invalid).
        brand: the header's label.
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
    lineage: tuple[LineageView, ...] = ()
    notices: tuple[NoticeView, ...] = ()
    brand: str = "icore audit"


@dataclass(frozen=True, slots=True)
class LiveTaskView:
    """One workflow of a live run, as a row and a details block.

    Attributes:
        task: task id. success/primary/replanned/blocked/auditor: display cells.
        ok: the workflow succeeded. error: why it stopped early ('').
        steps: ``(step, agent, ok, ms, detail)`` rows. proposals: ``(operation,
        proposer, decision, reasons)`` rows of its iCORE proposals.
    """

    task: str
    ok: bool
    primary: str
    replanned: str
    blocked: str
    auditor: str
    responses: str
    ms: str
    error: str = ""
    steps: tuple[tuple[str, str, bool, str, str], ...] = ()
    proposals: tuple[tuple[str, str, str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class LiveRunView:
    """The run page of a live run (``report.html``): decision first, then details.

    Attributes:
        id / title / subtitle: as in :class:`RunView`.
        verdict: ``ok`` or ``bad`` (the page's headline colour). headline: one line.
        notices: reasons of invalid or blocked actions, crashes, run errors (top).
        summary: ``(label, value)`` pairs. icore: ``(label, value)`` pairs of X.
        lineage: one lineage picture per protected action.
        tasks: workflow rows. diagnoses / flags: from the run's X.
        icore_href: relative link to the iCORE page.
        files: ``(name, what)`` of the run folder.
    """

    id: str
    title: str
    subtitle: str
    verdict: str
    headline: str
    notices: tuple[NoticeView, ...] = ()
    summary: tuple[tuple[str, str], ...] = ()
    icore: tuple[tuple[str, str], ...] = ()
    lineage: tuple[LineageView, ...] = ()
    tasks: tuple[LiveTaskView, ...] = ()
    diagnoses: tuple[DiagnosisView, ...] = ()
    flags: tuple[FlagView, ...] = ()
    icore_href: str | None = None
    files: tuple[tuple[str, str], ...] = ()


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
    "DecisionStepView",
    "DiagnosisView",
    "EventView",
    "FlagView",
    "IndexRow",
    "IndexView",
    "LineageView",
    "LiveRunView",
    "LiveTaskView",
    "MetricPointView",
    "NoticeView",
    "ObligationView",
    "RecordView",
    "RunView",
    "ValidationView",
]
