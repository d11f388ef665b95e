"""The lineage verdict of every protected action a recorded run carries (issue 26).

A trace with PlanFence lines (``Trace.extras["planfence"]``: records and gate
decisions, :class:`icore.fence.DecisionEntry`) gets one :class:`ActionLineage` per
protected action: its decisions grouped by ``task`` (else ``action``), in order, the
records its picture needs, and its status from the one verdict
(:func:`icore.fence.judge_action` / :func:`icore.fence.action_status`, planfence Sec. 3,
eq. 1). A policy that computes no frontier (``owner_head_freshness``) is judged on the
versions its roots cite as exact parents, labelled so. Reports only render these;
``icore audit --fail-on invalid`` counts :attr:`AuditResult.invalid_actions`.
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from icore.adapters._answer_twins import Twins
from icore.adapters._call_identity import made_by
from icore.adapters._called_again import called_again
from icore.adapters._lineage_index import RecordIndex
from icore.adapters._lineage_types import (
    FAILED_AFTER_AUTHORIZATION,
    GATE,
    NONE,
    PLAN_PARENTS,
    ActionLineage,
    ValidationPoint,
    counted_as,
)
from icore.adapters._reissued import reissued
from icore.adapters._trace import HumanAnswer, PlanfenceLog, Step, StepKind
from icore.adapters._unknown_outcome import unknown_outcomes
from icore.adapters._unrecorded_calls import unrecorded_calls
from icore.errors import IcoreError
from icore.fence import (
    ACTION_FIELD,
    DecisionEntry,
    Reason,
    action_ran,
    action_status,
    judge_action,
)
from icore.workspace import REJECTED as APPROVAL_REJECTED
from icore.workspace import ApprovalRequest


def _record_index(records: Sequence[Mapping[str, Any]]) -> dict[str, tuple[str, tuple[str, ...]]]:
    """Record id -> (key, parents), first occurrence of each id (as pages show them)."""
    out: dict[str, tuple[str, tuple[str, ...]]] = {}
    for r in records:
        rid = str(r.get("id", ""))
        if rid and rid not in out:
            out[rid] = (str(r.get("key", "")),
                        tuple(str(p) for p in r.get("parents") or ()))
    return out


def validation_point(entry: DecisionEntry, records: Sequence[Mapping[str, Any]]
                     ) -> ValidationPoint:
    """The :class:`ValidationPoint` of one decision among the action's records.

    Args:
        entry: the decision.
        records: the record lines the roots' parents are looked up in.

    Returns:
        The point: F(x) from the decision, else from the roots' cited parents.
    """
    return _point(entry, _record_index(records))


def _point(entry: DecisionEntry, by_id: Mapping[str, tuple[str, tuple[str, ...]]]
           ) -> ValidationPoint:
    frontier = dict(entry.frontier)
    source = GATE
    if not frontier:
        # the policy did not compute F(x): judge the versions the roots cite as parents
        cited = [p for r in entry.roots if r in by_id for p in by_id[r][1]]
        for key in entry.deps:
            hit = next((p for p in cited if p in by_id and by_id[p][0] == key), None)
            if hit is not None:
                frontier[key] = hit
        source = PLAN_PARENTS if frontier else NONE
    return ValidationPoint(entry, frontier, source,
                           judge_action(entry.deps, frontier, entry.heads))


def lineage_of(action: str, title: str, records: Sequence[Mapping[str, Any]],
               decisions: Sequence[DecisionEntry], *, status: str | None = None
               ) -> ActionLineage:
    """The :class:`ActionLineage` of one action.

    Args:
        action: the action's name (task).
        title: heading.
        records: the record lines of its picture.
        decisions: its gate decisions, in order.
        status: the status when the caller knows it (a live run's ground truth); None
            derives it from the last decision with :func:`icore.fence.action_status`,
            ``INVALID`` when any earlier decision authorized the action with a stale key
            (a later valid decision of the same action, e.g. a conflicting duplicate
            line, never hides an authorization that ran on stale facts; #29).

    Returns:
        The action's lineage.
    """
    by_id = _record_index(records)
    points = tuple(_point(e, by_id) for e in decisions)
    if status is None:
        if points:
            last = points[-1]
            status = action_status(last.entry.authorized, last.verdict,
                                   frontier_known=last.frontier_source != NONE)
            if any(p.entry.authorized and p.verdict.invalid(ground_truth=False)
                   for p in points[:-1]):
                status = "INVALID"  # an earlier authorization on stale facts ran (#29)
        else:
            status = action_status(None, judge_action((), {}, {}), frontier_known=False)
    return ActionLineage(action, title, status, tuple(records), points)


def trace_lineages(planfence: object, steps: Sequence[Step] | None = None
                   ) -> tuple[ActionLineage, ...]:
    """Every protected action of a trace's PlanFence lines (``Trace.extras["planfence"]``).

    Decisions are grouped by their ``task`` (else ``action``) field, in order; records
    and decisions that are not objects are skipped (the importers name them). A decision
    repeated with an ``error`` (equal but for it) replaces the earlier line in its place:
    one decision, failed after authorization (the MCP gateway's append-only trace, #25).

    Args:
        planfence: the trace's :class:`~icore.adapters.PlanfenceLog` (``Trace.planfence``)
            or its dict ``{"records": [...], "decisions": [...]}`` (anything else: no
            action).
        steps: the trace's steps; their tool outputs are held against the decisions
            (:func:`ran_after_refusal`). None (not given): no step is judged, nor any
            outcome; an empty sequence given with a :class:`PlanfenceLog`: the trace
            holds the gate's lines only (a run killed in its first protected call,
            QA qa-new17b #2), so every authorized call's outcome is unknown.

    Returns:
        One :class:`ActionLineage` per action, in first-decision order.

    Raises:
        icore.fence.DecisionFormatError: a decision object is malformed (the importers
            reject those first, naming the file).
    """
    gate_only = isinstance(planfence, PlanfenceLog) and steps is not None and not steps
    steps = () if steps is None else steps
    if isinstance(planfence, PlanfenceLog):
        records = [r for r in planfence.records if isinstance(r, Mapping)]
        entries = list(planfence.decisions)
        replans: Sequence[tuple[Sequence[str], Sequence[str]]] = planfence.replans
        resent: Sequence[tuple[Sequence[str], Sequence[str]]] = planfence.resent
    elif isinstance(planfence, Mapping):
        records = [r for r in planfence.get("records", ()) if isinstance(r, Mapping)]
        entries = [DecisionEntry.from_dict(d, where=f"planfence.decisions[{i}]")
                   for i, d in enumerate(planfence.get("decisions", ()))
                   if isinstance(d, Mapping)]
        replans = [(r.get("stale") or (), r.get("replan") or ())
                   for r in planfence.get("replans", ()) if isinstance(r, Mapping)]
        resent = [(r.get("replan") or (), r.get("keys") or ())
                  for r in planfence.get("resent_unchanged", ()) if isinstance(r, Mapping)]
    else:
        return ()
    groups: dict[str, list[DecisionEntry]] = {}
    undigested = planfence.edited_decisions if isinstance(planfence, PlanfenceLog) else {}
    edited_in: dict[str, str] = {}  # action -> why one of its decision lines is edited
    lines = planfence.edited_lines if isinstance(planfence, PlanfenceLog) else {}
    for i, e in enumerate(entries):
        name = str(e.task or e.action or "action")
        group = groups.setdefault(name, [])
        if i in undigested:
            edited_in.setdefault(name, undigested[i])
        if (why := lines.get(name) or lines.get(str(e.action))) is not None:
            edited_in.setdefault(name, why)
        at = _restated(group, e)
        if at is None:
            group.append(e)
        else:  # the same decision written again with its call's failure (a gateway)
            group[at] = e
    edited = planfence.edited if isinstance(planfence, PlanfenceLog) else {}
    index = RecordIndex(records, edited)  # once per trace, shared by every action (#29)
    out = [lineage_of(name, f"{name} · {es[0].action}".rstrip(" ·"),
                      index.picture(es), es) for name, es in groups.items()]
    shown = {name: why for name, es in groups.items()
             if (why := index.edited_shown(es)) is not None}
    answers = planfence.answers if isinstance(planfence, PlanfenceLog) else ()
    callers = planfence.callers if isinstance(planfence, PlanfenceLog) else {}
    branches = planfence.branches if isinstance(planfence, PlanfenceLog) else {}
    lineages = _edited(reissued(unknown_outcomes(ran_surplus(ran_after_refusal(human_answers(
        made_by(_resent(_linked(out, replans), resent), records, callers, branches),
        answers,
        records, steps), steps), steps), steps, gate_only=gate_only)), edited, edited_in,
        shown)
    lineages = (*lineages, *unrecorded_calls(planfence, lineages, lineage_of))  # qa-new15b
    if isinstance(planfence, PlanfenceLog):
        lineages = _answered(lineages, planfence.edited_answers)
        if planfence.chain_broken is not None:
            lineages = _all_invalid(lineages, planfence.chain_broken, records)
    return called_again(lineages, records, planfence.task_lines
                        if isinstance(planfence, PlanfenceLog) else {})


def _answered(lineages: tuple[ActionLineage, ...],
              edited: Sequence[tuple[str, str | None, int, str]]
              ) -> tuple[ActionLineage, ...]:
    """``lineages``, each action an edited task-less human answer could have answered ``INVALID``.

    ``edited``: ``(tool, arguments or None, step, why)``
    (:attr:`PlanfenceLog.edited_answers`). Such an answer is linked by tool and
    arguments (:func:`human_answers`: the first action of its tool with equal arguments,
    else the first of its tool), so it could have answered: the actions of its tool with
    its arguments or none recorded, and the one it is linked to (``human_step`` is its
    step); every action of its tool when it records no arguments or none has them (#29).
    """
    if not edited:
        return lineages
    out = list(lineages)
    for tool, args, step, why in edited:
        mine = [i for i, a in enumerate(out) if a.points and a.points[0].entry.action == tool]
        if args is not None and any(out[i].args == args for i in mine):
            mine = [i for i in mine if out[i].args in (args, None)
                    or out[i].human_step == step]
        for i in mine:
            a = out[i]
            if a.edited is None:
                out[i] = replace(a, status="INVALID", edited=f"{why}; recorded as {a.counted}")
    return tuple(out)


def _all_invalid(lineages: tuple[ActionLineage, ...], why: str,
                 records: Sequence[Mapping[str, Any]] = ()) -> tuple[ActionLineage, ...]:
    """Every action ``INVALID``: a writer's chain of digested lines is broken (#29).

    A deleted, moved, repeated or cut-off line may have concerned any action (a human's
    rejection, a call's failure, a decision): which one cannot be known, so no verdict
    read off the trace is trusted (fail closed); ``why`` names the line. An action
    record of ``records`` no decision cites (its decisions deleted: QA qa-new13a S2) is
    an action too, ``INVALID``, named ``<key>#<seq>``.
    """
    out = [a if a.edited is not None else replace(
        a, status="INVALID", edited=f"{why}; recorded as {a.counted}") for a in lineages]
    cited = {str(r) for a in lineages for p in a.points for r in p.entry.roots}
    for rec in records:
        c = rec.get("content")
        act = c.get(ACTION_FIELD) if isinstance(c, Mapping) else None
        if str(rec.get("id")) in cited or not (rec.get("role") == "action"
                                               or isinstance(act, Mapping)):
            continue
        name = f"{rec.get('key')}#{rec.get('seq')}"
        tool = act.get("name") if isinstance(act, Mapping) else None
        out.append(replace(lineage_of(name, f"{name} · {tool}" if isinstance(tool, str)
                                      else name, [rec], [], status="INVALID"),
                           edited=f"{why}; its gate decisions are not in the trace"))
    return tuple(out)


def _edited(lineages: Sequence[ActionLineage], edited: Mapping[str, str],
            decisions: Mapping[str, str], shown: Mapping[str, str]
            ) -> tuple[ActionLineage, ...]:
    """``lineages``, each resting on a record that does not match its id ``INVALID``.

    A record whose id is not its digest (:attr:`PlanfenceLog.edited`), or a decision
    line that does not match its digest (``decisions``: action -> why,
    :attr:`PlanfenceLog.edited_decisions`), was edited after it was recorded: the
    verdict read off it (valid, blocked) cannot be trusted, so the action fails closed
    (QA qa-new9 S3: an action record's price changed, id kept; #29: ``stale`` made
    ``authorized``). ``shown``: action -> why the first edited record its verdict rests
    on was edited (:meth:`RecordIndex.edited_shown`, computed once over the record graph).
    """
    if not edited and not decisions:
        return tuple(lineages)
    out = []
    for a in lineages:
        why = decisions.get(a.action) or (shown.get(a.action) if a.points else None)
        if why is None:
            roots = {str(x) for p in a.points for x in p.entry.roots}
            why = next((edited[r] for r in roots if r in edited), None)
        out.append(a if why is None else replace(
            a, status="INVALID", edited=f"{why}; recorded as {a.counted}"))
    return tuple(out)


APPROVED = "approved"
""":attr:`ActionLineage.human` of a call a human approved."""
REJECTED_BY_HUMAN = "rejected"
""":attr:`ActionLineage.human` of a call a human rejected."""


def human_answers(lineages: Sequence[ActionLineage], answers: Sequence[HumanAnswer],
                  records: Sequence[Mapping[str, Any]], steps: Sequence[Step] = ()
                  ) -> tuple[ActionLineage, ...]:
    """``lineages``, each action a human answered marked (:attr:`ActionLineage.human`).

    An answer naming a request id (:class:`~icore.workspace.ApprovalRequest`: the
    action, its arguments and the versions they derive from) answers the action whose
    root action record hashes to that request: exact. Another answer (LangGraph and AG2
    record the tool and arguments) answers the first action of its tool not yet
    answered whose own tool output (same ``task``) does not come before it, one whose
    recorded arguments equal the answer's first. An answer naming a ``task`` answers that
    action, and a thought repeating it (same tool, answer, arguments) links nowhere else.
    An action whose last decision is a human's ``approval_rejected`` is ``rejected``.
    An answer linked to no action changes nothing (it stays a thought of the timeline).
    """
    out = list(lineages)
    if answers:
        by_id = {str(r.get("id")): r for r in records}
        request_of: dict[str, int] = {}
        args_of: dict[int, str] = {}
        for i, a in enumerate(out):
            for root in (r for p in a.points for r in p.entry.roots):
                got = _request(by_id.get(root), by_id)
                if got is not None:
                    request_of.setdefault(got[0], i)
                    args_of.setdefault(i, got[1])
        tasks = {str(a.points[-1].entry.task): i for i, a in enumerate(out)
                 if a.points and a.points[-1].entry.task}
        first_out: dict[int, int] = {}
        for st in steps if tasks else ():
            if st.kind == StepKind.TOOL_OUTPUT and st.task in tasks:
                first_out.setdefault(tasks[st.task], st.index)
        taken: set[int] = set()
        by_tool: dict[str, deque[int]] = {}  # tool -> its actions, in order (one pass, #29)
        by_args: dict[tuple[str, str], deque[int]] = {}
        for i, a in enumerate(out):
            if a.points:
                by_tool.setdefault(a.points[0].entry.action, deque()).append(i)
                if i in args_of:
                    by_args.setdefault((a.points[0].entry.action, args_of[i]), deque()).append(i)
        named = {a.action: i for i, a in enumerate(out)}
        exact = [x for x in answers if x.task in named]  # a refused call's own: exact
        for ans in exact:
            at = named[str(ans.task)]
            taken.add(at)
            out[at] = replace(out[at], human_step=ans.step, human_during=ans.during,
                              human=APPROVED if ans.approved else REJECTED_BY_HUMAN)
        twins = Twins(exact)  # indexed: each thought finds its twin at once (#29)
        for ans in (x for x in answers if x.task not in named):
            twin = twins.take(ans)
            if twin is not None:  # the same answer, also written as a thought
                at = named[str(twin.task)]
                out[at] = replace(out[at], human_step=min(ans.step, twin.step))
                continue
            hit = request_of.get(ans.request) if ans.request is not None else None
            if hit is None or hit in taken:  # the first open one of its tool (same args first)
                def ok(i: int, step: int = ans.step) -> bool:
                    return first_out.get(i, step + 1) > step
                hit = None if ans.args is None else _first_open(
                    by_args.get((ans.tool, ans.args), deque()), taken, ok)
                if hit is None:
                    hit = _first_open(by_tool.get(ans.tool, deque()), taken, ok)
            if hit is not None:
                taken.add(hit)
                out[hit] = replace(out[hit], human_step=ans.step, human_during=ans.during,
                                   human=APPROVED if ans.approved else REJECTED_BY_HUMAN)
    for i, a in enumerate(out):
        if a.points and a.points[-1].entry.reason == APPROVAL_REJECTED:
            out[i] = replace(a, human=REJECTED_BY_HUMAN)
    return tuple(out)


def _first_open(order: deque[int], taken: set[int], ok: Callable[[int], bool]) -> int | None:
    """The first index of ``order`` not in ``taken`` that is ``ok``, or None.

    The taken ones at its front are dropped for good (``taken`` only grows), so linking
    every answer of a run walks each tool's actions about once.
    """
    while order and order[0] in taken:
        order.popleft()
    return next((i for i in order if i not in taken and ok(i)), None)


def _request(rec: Mapping[str, Any] | None, by_id: Mapping[str, Mapping[str, Any]]
             ) -> tuple[str, str] | None:
    """The approval request id and canonical arguments of an action record, or None.

    None when ``rec`` is no action record (``{"planfence.action": {name, args}}``), a
    parent's key is not in the trace, or the arguments have no JSON form.
    """
    c = rec.get("content") if rec is not None else None
    act = c.get(ACTION_FIELD) if isinstance(c, Mapping) else None
    if not isinstance(act, Mapping) or not isinstance(act.get("name"), str) \
            or not isinstance(act.get("args"), Mapping) or rec is None:
        return None
    basis: dict[str, str] = {}
    for pid in rec.get("parents") or ():
        key = by_id.get(str(pid), {}).get("key")
        if not isinstance(key, str):
            return None
        basis[key] = str(pid)
    try:
        req = ApprovalRequest.of(act["name"], act["args"], basis)
        args = json.dumps(act["args"], sort_keys=True, separators=(",", ":"),
                          allow_nan=False)
    except (IcoreError, TypeError, ValueError, RecursionError):
        return None
    return req.id, args


def ran_after_refusal(lineages: Sequence[ActionLineage], steps: Sequence[Step]
                      ) -> tuple[ActionLineage, ...]:
    """``lineages``, each refused one whose own recorded tool output says it ran ``INVALID``.

    A call the gate refused (stale, any block) or a human rejected never runs; its own
    tool output saying it did (``exitcode`` 0, ``ran: true``; :attr:`Step.ran`)
    contradicts the decision: the trace records an effect no authorization covers. An
    output is the call's own only when it names the call's ``task`` (:attr:`Step.task`,
    the recorders write it on the refused call's output and decisions) and its tool, and
    every decision of that task refused it (no decision authorized a run the output could
    be of). An output matched to no decision flags nothing: outputs are never counted or
    paired by tool name or order (an unfenced tool of the same name, retries, another
    agent's call; #28).
    """
    by_task: dict[tuple[str, str], int] = {}
    for i, a in enumerate(lineages):
        entries = [p.entry for p in a.points]
        if (entries and all(e.task for e in entries) and not action_ran(a.status)
                and not any(e.authorized for e in entries)):
            by_task[(str(entries[0].task), entries[0].action)] = i
    out = list(lineages)
    for s in steps:
        if s.ran is not True or s.task is None or s.tool is None:
            continue
        hit = by_task.get((s.task, s.tool))
        if hit is not None and out[hit].ran_anyway is None:
            out[hit] = replace(lineages[hit], status="INVALID", ran_anyway=s.content[:300])
    return tuple(out)


_GATEWAY_POLICY = "icore mcp gateway"
"""``icore.integrations.GATEWAY_POLICY`` (a layer above): the refusals an app recorded of
calls it made through the gateway, whose authorizations are in the gateway's trace."""


def ran_surplus(lineages: Sequence[ActionLineage], steps: Sequence[Step]
                ) -> tuple[ActionLineage, ...]:
    """``lineages`` with each protected tool's surplus of "ran" outputs flagged ``INVALID``.

    :func:`ran_after_refusal` flags a refused call whose own output (same ``task``) says
    it ran. An edited trace could hide such a call otherwise: an added "ran" output with
    no ``task``, or a refused call's decision deleted and its output flipped to ran (#29,
    QA qa-new8 S3). So, per protected tool (one the trace's decisions name), the outputs
    that say a call ran are counted against the gate's authorized decisions of it (an
    output naming an authorized call's task is that call's own, a retry included); a
    surplus is an effect no authorization covers, failed closed: the tool's refused actions not yet
    flagged are marked ``INVALID`` (the one whose own task a surplus output names
    first, else the last ones), and an output left over with no refused action to
    blame becomes an ``INVALID`` action of its own (no points: no decision). An honest
    trace, concurrent calls included, writes one output per call: no surplus. A tool
    whose only decisions are the gateway's refusals an app recorded (an app calling
    through ``icore mcp``: the authorizations are in the gateway's trace) is not counted.

    Returns:
        The lineages (refused ones blamed for a surplus marked ``INVALID`` with
        ``ran_anyway`` the output), then one ``INVALID`` lineage per surplus output no
        refused action is left to blame (no points: no decision covers it).
    """
    tools: dict[str, list[int]] = {}
    for i, a in enumerate(lineages):
        if a.points:
            tools.setdefault(a.points[0].entry.action, []).append(i)
    claimed = {(a.points[-1].entry.task, a.points[-1].entry.action)
               for a in lineages if a.points and a.ran_anyway is not None}
    outputs: dict[str, list[Step]] = {}  # each protected tool's "ran" outputs, one pass
    for st in steps:
        if st.kind == StepKind.TOOL_OUTPUT and st.ran is True and st.tool in tools \
                and (st.task, st.tool) not in claimed:
            outputs.setdefault(st.tool, []).append(st)
    out = list(lineages)
    extra: list[ActionLineage] = []
    for tool, idxs in tools.items():
        allowed: dict[str | None, int] = {}  # authorized decisions per task (None: untagged)
        for i in idxs:
            for p in out[i].points:
                if p.entry.authorized:
                    allowed[p.entry.task] = allowed.get(p.entry.task, 0) + 1
        if not allowed and all(p.entry.policy == _GATEWAY_POLICY for i in idxs
                               for p in out[i].points):
            continue  # an app calling through the gateway: its gate, and trace, is there
        pool: list[Step] = []
        for st in outputs.get(tool, ()):
            if st.task is not None and st.task in allowed:  # its own call's (a retry too)
                allowed[st.task] = max(0, allowed[st.task] - 1)
            else:
                pool.append(st)
        surplus = pool[sum(allowed.values()):]
        refused = [i for i in idxs if not action_ran(out[i].status)
                   and out[i].ran_anyway is None]
        for st in surplus:
            own = [i for i in refused if st.task is not None
                   and out[i].points[-1].entry.task == st.task]
            if own or refused:
                i = (own or refused)[-1]
                refused.remove(i)
                out[i] = replace(out[i], status="INVALID", ran_anyway=st.content[:300])
            else:
                extra.append(ActionLineage(
                    f"{st.task or tool} (no decision)", f"{tool} · ran with no decision",
                    "INVALID", (), (), ran_anyway=st.content[:300]))
    return (*out, *extra)


def _restated(group: Sequence[DecisionEntry], entry: DecisionEntry) -> int | None:
    """The index in ``group`` of the decision ``entry`` restates with an ``error``.

    An append-only trace (the MCP gateway's) writes a decision before the call it
    authorized is forwarded, and the same decision again, with the call's ``error``,
    when the call failed (#25): one decision, failed after authorization. None when
    ``entry`` is a decision of its own.
    """
    if entry.error is None:
        return None
    bare = replace(entry, error=None, may_have_run=None)
    for i in range(len(group) - 1, -1, -1):
        if group[i].error is None and group[i] == bare:
            return i
    return None


def _linked(lineages: list[ActionLineage],
            replans: Sequence[tuple[Sequence[str], Sequence[str]]]) -> tuple[ActionLineage, ...]:
    """``lineages`` with each recorded replan linked: stale action -> its replan.

    A replan's stale roots name the action whose decisions cite them, its new roots the
    action that replanned it; a replan inside one action (the fence's own, the same
    task) links nothing. Each action is linked once (the first recorded replan). Only a
    call refused ``stale`` (its fresh values handed to the model) is replanned by a
    later one: a replan blocked ``second_change`` handed nothing, so a call the gate
    takes as the replan again (the model retried it from the same values) is not its
    replan (QA qa-new9 S2).
    """
    if not replans:
        return tuple(lineages)
    owner: dict[str, int] = {}  # root id -> the action whose decisions cite it first
    for i, a in enumerate(lineages):
        for p in a.points:
            for r in p.entry.roots:
                owner.setdefault(str(r), i)
    of: dict[int, int] = {}
    for old, new in replans:
        stale = next((owner[str(r)] for r in old if str(r) in owner), None)
        again = next((owner[str(r)] for r in new if str(r) in owner), None)
        if (stale is None or again is None or stale == again or again in of
                or stale in of.values() or not _handed_over(lineages[stale])):
            continue
        of[again] = stale
    for again, stale in of.items():
        lineages[stale] = replace(lineages[stale], replanned_as=lineages[again].action)
        lineages[again] = replace(lineages[again], replan_of=lineages[stale].action)
    return tuple(lineages)


def _resent(lineages: tuple[ActionLineage, ...],
            resent: Sequence[tuple[Sequence[str], Sequence[str]]]) -> list[ActionLineage]:
    """``lineages``, each replan a ``resent_unchanged`` line names marked with its keys."""
    out = list(lineages)
    for roots, keys in resent:
        ids = {str(r) for r in roots}
        i = next((i for i, a in enumerate(out) if a.replan_of is not None and any(
            str(r) in ids for p in a.points for r in p.entry.roots)), None)
        if i is not None and keys:
            out[i] = replace(out[i], resent_unchanged=tuple(str(k) for k in keys))
    return out


def _handed_over(a: ActionLineage) -> bool:
    """Whether ``a`` was refused ``stale`` at its last decision.

    The model got the fresh values: its next call may be the one replan.
    """
    return bool(a.points) and a.points[-1].entry.reason == Reason.STALE.value


__all__ = ["APPROVED", "FAILED_AFTER_AUTHORIZATION", "REJECTED_BY_HUMAN", "ActionLineage",
           "ValidationPoint", "counted_as", "human_answers", "lineage_of",
           "ran_after_refusal", "trace_lineages", "validation_point"]
