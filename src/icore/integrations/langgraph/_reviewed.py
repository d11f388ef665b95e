"""Calls a human reviewed in LangChain's ``HumanInTheLoopMiddleware`` (issue 28 item 5).

The middleware asks its human before the tool runs (``create_agent(...,
middleware=[HumanInTheLoopMiddleware(interrupt_on={"ship": True})])``), outside icore, and
its "approve" covers the call the human was shown: the model's arguments (or the
human's ``edit``). A fenced tool with ``replan=`` replans inside the tool, after the
middleware, so the replanner's call would run without the human. A fenced call the
middleware reviewed is therefore bound to the request the human saw
(:class:`~icore.workspace.ApprovalRequest`: its arguments and the versions of D(a) they
derive from, planfence App. A.3): anything else, a replanned call included, is refused
``approval_changed`` (nothing runs) and the model's next call is put to the human again
by the middleware. Pure over the tool's runtime: reads no clock, does no I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping
from typing import Any

from icore.integrations._approvals import changed
from icore.integrations._fenced import FenceGuard
from icore.workspace import (
    APPROVAL_CHANGED,
    APPROVAL_FIELD,
    ApprovalRequest,
    CallRefused,
    read_answer,
)

REVIEW_STATE_KEY = "hitl_edited_tool_calls"
"""The graph-state key ``HumanInTheLoopMiddleware`` (batched mode) adds to its agent and
writes at each review: its presence says the agent's calls are reviewed there."""
_SCRATCHPAD = "__pregel_scratchpad"
"""LangGraph's per-task scratchpad: ``resume`` holds the answers given in this task
(the middleware's ``per_call`` mode asks inside the tool call's own task)."""

Check = Callable[[ApprovalRequest], bool]

UNMATCHED = "unmatched"
"""The recorded ``decision`` of an answer to icore's ``approval=True`` question that names
another request's id: neither an approval nor a rejection (the audit links no answer to
the call; the call is asked again)."""


def middleware_reviewed(runtime: Any) -> bool:
    """Whether a fenced call may have been approved by ``HumanInTheLoopMiddleware``.

    Batched mode: the agent's state carries :data:`REVIEW_STATE_KEY` (the middleware is
    in the agent and has asked before). ``per_call`` mode: the tool call's own task was
    resumed and its first answer is the middleware's decision (``{"type": "approve"}`` or
    ``"edit"``; the answers to icore's ``approval=True`` question or to the tool's own
    ``interrupt()`` are not). Either way the call is bound to what the human saw; a tool
    the middleware does not cover costs at most one more model turn after a replan
    (fail closed).
    """
    state = getattr(runtime, "state", None)
    if isinstance(state, Mapping) and REVIEW_STATE_KEY in state:
        return True
    config = getattr(runtime, "config", None)
    conf = config.get("configurable") if isinstance(config, Mapping) else None
    pad = conf.get(_SCRATCHPAD) if isinstance(conf, Mapping) else None
    answers = getattr(pad, "resume", None)
    # the task's first answer is the middleware's decision (it asks before the tool);
    # icore's own approval=True question and the tool's own interrupt() answer otherwise
    first = answers[0] if isinstance(answers, list) and answers else None
    return isinstance(first, Mapping) and first.get("type") in ("approve", "edit")


def reviewed_check(guard: FenceGuard, name: str, args: Mapping[str, Any],
                   turn: Hashable | None, inner: Check | None) -> Check | None:
    """The check before a reviewed call runs: exactly the request the human saw.

    Built before the gate runs (the versions the human saw); call it inside the call's
    :func:`~icore.integrations._scope_once.one_call` so D(a) is asked once.

    Args:
        guard: the tool's guard (agent mode).
        name: the tool's name.
        args: the call's normalised arguments (what the middleware showed, or the
            human's edit, which the middleware substitutes before the tool runs).
        turn: the model turn the call came from (its reads are the versions shown).
        inner: another check to ask after this one (``approval=True``'s own question).

    Returns:
        An approver for :meth:`FenceGuard.run`'s ``approve``; it raises
        :class:`~icore.workspace.CallRefused` (``approval_changed``, naming what differs)
        for any other request: a replan's new arguments, or the same arguments derived
        from newer versions. None in fence mode (no workspace agent).
    """
    team = guard.handle
    if team is None:
        return inner
    try:
        keys = guard.depends_on(args) if callable(guard.depends_on) else guard.depends_on
        wanted = team.request_for(name, args, keys, turn=turn)
    except Exception:  # fail closed: no request can be tied to the approval (a broken
        wanted = None  # depends_on is then the guard's own typed error, as unreviewed)

    def check(req: ApprovalRequest) -> bool:
        if wanted is None or wanted.id != req.id:
            raise CallRefused(APPROVAL_CHANGED, changed(name, dict(args), req, wanted))
        return inner(req) if inner is not None else True

    return check


def human_decisions(asked: list[tuple[Any, Any]], resume: Any
                    ) -> list[tuple[str | None, Any, str]]:
    """What a human decided for each call a pause asked about: ``(tool, args, decision)``.

    Args:
        asked: the pause's interrupts as ``(id, value)``: ``HumanInTheLoopMiddleware``'s
            batched request (``{"action_requests": [{"name", "args"}, ...]}``) or a
            ``per_call`` ``{"type": "tool_approval", "name", "args"}``; any other value
            (``interrupt()`` in the app's own code, icore's ``approval=True`` question).
        resume: the ``Command(resume=...)`` value: ``{"decisions": [...]}``, or a
            mapping of interrupt id -> answer, or one answer for a single interrupt.

    Returns:
        One entry per call asked (``decision``: ``approve`` / ``edit`` / ``reject`` /
        ``respond``; icore's ``approval=True`` question: ``approve`` / ``reject`` as
        :func:`~icore.workspace.read_answer` reads the answer, :data:`UNMATCHED` when it
        names another request's id (not taken: the call is asked again, QA qa-new12b
        S3); ``answered`` with the tool None for another question); empty
        when the answer cannot be paired with the questions.
    """
    out: list[tuple[str | None, Any, str]] = []
    for _, value, answer in paired(asked, resume):
        if isinstance(value, Mapping) and isinstance(value.get("action_requests"), list):
            said = answer.get("decisions") if isinstance(answer, Mapping) else None
            if isinstance(said, list):
                for req, d in zip(value["action_requests"], said, strict=False):
                    if isinstance(req, Mapping):
                        out.append((str(req.get("name")), req.get("args"), _kind(d)))
            continue
        if isinstance(value, Mapping) and value.get("type") == "tool_approval":
            out.append((str(value.get("name")), value.get("args"), _kind(answer)))
            continue
        asked_of = value.get(APPROVAL_FIELD) if isinstance(value, Mapping) else None
        if isinstance(asked_of, Mapping):  # icore's approval=True question: yes or no
            got = read_answer(answer)  # an answer naming another request is neither:
            said = UNMATCHED if got.id is not None and got.id != asked_of.get("id") \
                else "approve" if got.approved else "reject"  # the call is asked again
            out.append((str(asked_of.get("action")), asked_of.get("args"), said))
            continue
        out.append((None, None, "answered"))
    return out


def paired(asked: list[tuple[Any, Any]], resume: Any) -> list[tuple[Any, Any, Any]]:
    """The questions a resume answers, ``(id, value, answer)`` (see :func:`human_decisions`).

    ``resume`` maps interrupt ids to answers, or is the one answer to a single question.
    """
    by_id = resume if isinstance(resume, Mapping) and asked and all(
        isinstance(k, str) and k in {i for i, _ in asked} for k in resume) else None
    out = []
    for iid, value in asked:
        answer = by_id.get(iid) if by_id is not None else resume if len(asked) == 1 else None
        if answer is not None:
            out.append((iid, value, answer))
    return out


def _kind(decision: Any) -> str:
    """A decision's type (``approve`` ...), ``answered`` when it has none."""
    t = decision.get("type") if isinstance(decision, Mapping) else None
    return str(t) if t else "answered"
