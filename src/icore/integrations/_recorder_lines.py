"""How a :class:`~icore.integrations.RunRecorder` writes a protected call's gate lines.

:func:`record_gate` is :meth:`RunRecorder.gate <icore.integrations.RunRecorder.gate>`:
the call's gate decisions, its plan and replan lines (one ``plan_id`` per logical call;
a replan only from the versions a stale refusal handed over, QA qa-new9 S2), its PlanFence lines
and a block. :func:`add_once` writes a ``task`` / ``termination`` line once.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping
from typing import Any

from icore._arg_diff import arg_difference
from icore.errors import IcoreError
from icore.fence import ActionResult, Reason
from icore.integrations._call_lines import after_gate, refusal_fields
from icore.integrations._failed import Failed
from icore.integrations._trace_data import jsonable, text_of
from icore.integrations._write_ahead import call_task
from icore.records import Lookup, RecordId

Scope = tuple[str, str, tuple[str, ...]]
"""One logical protected call: (its owner, tool, the facts it depends on)."""
Waiting = tuple[tuple[RecordId, ...], str, str | None, Hashable | None, Mapping[str, str],
                dict[str, Any] | None]
"""A refused stale call waiting for its replan: (roots, caller, plan id, model turn, the
versions of D(a) it was refused at: key -> the owner's head, handed to the model, its
first gate line: the call's plan line, written when its replan comes, goes before it)."""


def plan_before(rec: Any, anchor: Mapping[str, Any] | None, agent: str, content: Any,
                **fields: Any) -> None:
    """A ``plan`` line placed before ``anchor`` (a refused call's first gate line).

    A stale call's own plan is written only once its replan shows it was one logical
    call, but it came before the call's decision: it goes where it happened (QA
    qa-new13b S4), else (no anchor, or the anchor was removed) at the end.
    """
    line = rec.add(agent, "plan", content, **fields)
    if anchor is None:
        return
    with rec._lock:
        j = next((k for k, ev in enumerate(rec.events) if ev is anchor), None)
        i = next((k for k, ev in enumerate(rec.events) if ev is line), None)
        if i is None or j is None or j > i:
            return
        del rec.events[i], rec._at[i]
        rec.events.insert(j, line)
        rec._at.insert(j, rec._at[j])  # at the anchor's time: the order stays sorted


def take_replan_of(stale: dict[Scope, list[Waiting]], scope: Scope,
                   turn: Hashable | None, frontier: Mapping[str, str] | None = None
                   ) -> Waiting | None:
    """The oldest refused call in ``scope`` a call of ``turn`` replans (taken), if any.

    Not one of the same model turn: siblings are planned from the same reads; a turn
    with a ``replans(earlier_turn) -> bool`` method decides itself (a LangGraph branch:
    a parallel branch's call never replans another branch's refusal). With the call's
    ``frontier`` (F(x) of its first decision), only a refused call whose handed versions
    it derives from: a call made from facts read again after another change is a fresh
    plan, not that replan (QA qa-new9 S2). Call with the recorder's lock held.
    """
    waiting = stale.get(scope)
    if not waiting:
        return None
    later = getattr(turn, "replans", None)
    for i, w in enumerate(waiting):
        if (turn is None or w[3] is None or (
                bool(later(w[3])) if callable(later) else w[3] != turn)) and (
                not frontier or not w[4] or dict(w[4]) == dict(frontier)):
            del waiting[i]
            if not waiting:
                del stale[scope]
            return w
    return None


def record_gate(rec: Any, agent: str | None, tool: str, result: ActionResult, *,
                lookup: Lookup | None, call_id: Any, args: Mapping[str, Any] | None,
                owner: str | None, turn: Hashable | None, refused: str | None) -> str:
    """:meth:`RunRecorder.gate <icore.integrations.RunRecorder.gate>` (its docstring)."""
    who = agent or rec.caller(tool, call_id) or "executor"
    first = result.decisions[0] if result.decisions else None
    task = call_task(rec, tool, result.decisions)  # taken before its body ran, if it was
    # one logical call: this owner, tool, facts (parallel calls on other facts differ)
    scope = (owner or who, tool, tuple(first.deps) if first is not None else ())
    frontier = dict(first.frontier) if first is not None else {}
    with rec._lock:  # the previous such call was stale and handed the fresh values
        stale = take_replan_of(rec._stale, scope, turn, frontier)
        spent = rec._spent.get(scope)
        if stale is None and spent is not None and spent[4] and dict(spent[4]) == frontier:
            stale = spent  # the blocked replan tried again from the same handed values
    handed_over = stale is not None
    stale_roots, planner, plan_id = stale[:3] if stale is not None else ((), who, None)
    replanned = result.replanned and len(result.decisions) > 1 and not handed_over
    if (replanned or handed_over) and first is not None and plan_id is None:
        # this call's original plan before its replan, once per logical call
        plan_id = rec._new_plan_id(tool)  # the plan of the call that was refused
        plan_before(rec, stale[5] if stale is not None else None, planner,
                    f"plan for {tool}", roots=list(stale_roots or first.roots),
                    plan_id=plan_id)
    if handed_over:  # the model re-planned from the fresh values it was handed
        rec.plan(who, f"replan for {tool}: {text_of(dict(args or result.args))}",
                 roots=list(first.roots) if first is not None else None, replan=True,
                 plan_id=plan_id)
    gate_lines = [rec.add(who, "thought", f"gate {d.outcome.value}/{d.reason.value} for "
                          f"{tool}", gate={"outcome": d.outcome.value,
                                           "reason": d.reason.value, "tool": tool,
                                           "replanned": d.replanned or handed_over,
                                           "point": d.point}, task=task,
                          call_id=None if call_id is None else str(call_id))
                  for d in result.decisions]
    if handed_over and result.executed:
        with rec._lock:  # its tool output says so too
            rec._replans.add((who, tool))
    if replanned:
        rec.plan(who, f"replan for {tool}: {text_of(dict(result.args))}",
                 roots=list(result.roots), replan=True, plan_id=plan_id)
    if handed_over and not result.executed and \
            result.final.reason is Reason.SECOND_CHANGE:
        with rec._lock:  # the one replan was blocked: its logical call is spent
            rec._spent[scope] = (tuple(stale_roots or (first.roots if first else ())),
                                 planner, plan_id, turn, stale[4] if stale else {}, None)
    elif not result.executed and result.final.reason is Reason.STALE:
        with rec._lock:  # a stale call without a replan: the next call replans
            # ... with the same logical call's plan when this was its replan (a
            # replan blocked second_change ends its logical call: none waits)
            rec._stale.setdefault(scope, []).append(
                (tuple(first.roots) if first is not None else (), who, plan_id, turn,
                 dict(result.final.heads), gate_lines[0] if gate_lines else None))
    failure = result.value if result.executed and isinstance(
        result.value, Failed) and result.value.ran else None
    rec.lineage(tool, result.decisions, lookup=lookup, refused=after_gate(result, refused),
                failed=None if failure is None else failure.error,
                may_have_run=None if failure is None else failure.may_have_run, task=task)
    if not result.executed:  # its output names its task: the audit matches by it
        why = refused or result.final.reason.value
        rec.tool_call(who, tool, result.args, f"BLOCKED: {why}: {result.detail}",
                      error=True, blocked=True, task=task, **refusal_fields(refused))
    return who


def add_once(rec: Any, kind: str, agent: str, content: Any, *, traced: bool,
             at: float | None, **fields: Any) -> dict[str, Any]:
    """Add a ``task`` / ``termination`` line unless the newest such line is the same.

    The same: same ``agent`` and text (``final_answer`` of a termination), and either
    of the two lines came from a framework's trace (``traced``): a request or an end a
    tracing processor recorded and the app recorded too is one line (QA qa-new9 S4);
    two untraced ones are two. Returns the line (the newest one when not added).
    """
    text = text_of(content)
    field = "final_answer" if kind == "termination" else "content"
    with rec._lock:
        last: dict[str, Any] | None = next(
            (e for e in reversed(rec.events) if e.get("kind") == kind), None)
        if last is not None and last.get("agent") == agent and last.get(field) == text \
                and (traced or any(t is last for t in rec._traced)):
            return last
    line: dict[str, Any] = rec.add(agent, kind, content, at=at, **fields)
    if traced:
        with rec._lock:
            rec._traced.append(line)
    return line


def asked_as(rec: Any, call_id: Any,
             normalize: Callable[[Mapping[str, Any]], Mapping[str, Any]]) -> None:
    """Note on the model turn's tool call ``call_id`` its arguments as the tool sees them.

    ``normalize``: the tool's own normalizer (:class:`~icore.integrations.ArgNormalizer`:
    its schema applied, defaults filled in, dates and numbers in their JSON form), put
    over the arguments the newest turn asking for ``call_id`` recorded. When that normal
    form differs from them in a value the model gave (``"10"`` read as ``10``, a
    date-time read as a date), the tool call gets ``args_normal``: the audit holds the
    call's action record against it instead of the raw arguments
    (:class:`~icore.adapters._turn_args.TurnArgs`, QA qa-new14 S3), so the schema's
    reading is never taken for a forged argument. Computed from the turn's arguments,
    never from what the tool received: a call the framework changed on the way is still
    seen. Arguments the schema refuses are left alone.
    """
    if not call_id or rec is None:
        return
    with rec._lock:
        hit = next((c for ev in reversed(rec.events) if ev.get("kind") == "output"
                    for c in reversed(ev.get("tool_calls") or ()) if isinstance(c, dict)
                    and c.get("id") == str(call_id)), None)
        asked = hit.get("args") if hit is not None else None
    if not isinstance(asked, dict):
        return
    try:
        norm = jsonable(dict(normalize(asked)))
    except (IcoreError, ValueError, TypeError):
        return
    if isinstance(norm, dict) and arg_difference(asked, norm) is not None:
        with rec._lock:
            hit["args_normal"] = norm  # type: ignore[index]


__all__ = ["Scope", "Waiting", "add_once", "asked_as", "record_gate", "take_replan_of"]
