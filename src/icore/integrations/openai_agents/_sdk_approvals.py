"""Human approvals of fenced Agents SDK tools (issue 28 item 5; planfence App. A.3).

The SDK asks its human before the call reaches the gate: :func:`binding` notes, when the
SDK asks the tool's ``needs_approval``, the call's :class:`~icore.workspace.ApprovalRequest`
(arguments and the versions of D(a) the agent read), so the approved call later runs only
as that exact request; the messages and the record of a call refused
``approval_changed``.
"""

from __future__ import annotations

import functools
import inspect
import json
import logging
import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any

from agents import FunctionTool
from agents.tool_context import ToolContext

from icore.integrations import FenceGuard, active_recorder
from icore.integrations._pending_file import folder_pending
from icore.integrations.openai_agents._sdk_answers import (
    kept_key,
    note_asker,
    witness_rejections,
)
from icore.integrations.openai_agents._tracing import ACTIVE_PROCESSOR
from icore.workspace import Agent as TeamAgent
from icore.workspace import ApprovalRequest, Call, restore_reads

_log = logging.getLogger("icore.integrations")


def unread_after_approval(name: str, call: Call, team: Any = None,
                          call_id: Any = None) -> str:
    """The model's message for an approved call refused ``not_read`` (reads are lost).

    When ``team``'s workspace is on disk and no approval request is kept there for
    ``call_id`` (the attempts file or its row was deleted, or pruned), it says so and
    where it was looked for (QA qa-new18a #10).
    """
    keys = ", ".join(sorted(call.fresh))
    values = json.dumps(dict(sorted(call.fresh.items())), ensure_ascii=False, default=str)
    why = ("reads are kept in memory: a run resumed in a new process, after a restart, "
           "starts with none")
    try:
        file = folder_pending(team) if team is not None and isinstance(call_id, str) else None
        if file is not None and file.get(kept_key(team, name, call_id)) is None:
            why = (f"the approval request kept for this call when the human was asked was "
                   f"not found in {file.path} (table pending_approvals: the file or its row "
                   f"was deleted, or it was older than 7 days), and reads are kept in memory")
    except Exception:  # unreadable: the generic reason (the log names the file)
        pass
    return (f"PlanFence blocked {name} (not_read): this approved call depends on {keys}, and "
            f"this agent holds no read of it here ({why}), so the approval cannot "
            f"be tied to the version the call was decided from; nothing ran. Current "
            f"values: {values}. Decide from these values and call {name} again; the new "
            f"call is put to the human again.")


MAX_ASKED = 4096
"""Most approval requests remembered per tool (older approved calls fail closed)."""
NO_APPROVAL: Any = object()
"""A call that did not run through the SDK's human approval."""
NOT_ASKED: Any = object()
"""An approved call no fenced tool of its workspace agent put to the human here."""

_BOOKS: weakref.WeakKeyDictionary[Any, dict[str, OrderedDict[Any, Any]]] = \
    weakref.WeakKeyDictionary()
"""Workspace agent -> tool name -> tool-call id -> the request its human was asked."""
_BOOKS_LOCK = threading.Lock()


def asked_book(owner: Any, name: str) -> OrderedDict[Any, ApprovalRequest | None]:
    """The requests put to the human for tool ``name`` of ``owner``, by tool-call id.

    Kept per workspace agent (``owner``, held weakly) and tool name, not per fenced tool
    object: an app that builds its fenced tools again for each request (a web handler
    that pauses in one request and resumes in the next, in one process) finds the
    request the first object noted (QA qa-new15a S2). A request that could not be built
    is noted as None.
    """
    with _BOOKS_LOCK:
        per = _BOOKS.get(owner)
        if per is None:
            per = _BOOKS[owner] = {}
        return per.setdefault(name, OrderedDict())


def unasked_why(name: str, noted: Any) -> str:
    """Why an approved call's request is unknown here (``noted``: what the book holds).

    None: it was asked, but its request could not be built then; anything else (the
    book's default, :data:`NOT_ASKED`): no fenced ``name`` of this workspace agent put
    the call to a human in this process. Told apart by None, not by the sentinel's
    identity: a reload of this module makes a new sentinel, and the tools built before
    hold the old one.
    """
    if noted is not None:
        return ("no fenced " + name + " of this workspace agent put this call to a human in "
                "this process (the question was asked in another process and its saved run "
                "state resumed here, or by a tool that was not fenced then, or more than "
                f"{MAX_ASKED} questions ago), so the approval cannot be tied to the versions "
                "the call derives from")
    return ("when the human was asked, the call's request could not be tied to the versions "
            "it derives from (its arguments did not fit, or a fact it depends on was not "
            "read)")


_Key = tuple[int, str, str | None]
_WITNESSED: OrderedDict[_Key, Any] = OrderedDict()
"""(id of the SDK agent, tool name, call id; None: every call) -> a weak reference to that
agent: the approvals given in this process."""
_USED: OrderedDict[_Key, Any] = OrderedDict()
"""Approvals given here that a run of their call used up (same keys as _WITNESSED)."""
_WITNESS_LOCK = threading.Lock()
WITNESS_MARK = "__icore_witness__"
"""Attribute naming icore's wrapper of ``RunContextWrapper.approve_tool`` (its value: the
function noting an approval), found by any copy of icore: a reload never wraps twice."""


def _item_key(item: Any) -> tuple[Any, str, str] | None:
    """(SDK agent, tool name, call id) of a ``ToolApprovalItem`` (None when unreadable)."""
    raw = getattr(item, "raw_item", None)
    call_id = raw.get("call_id") if isinstance(raw, dict) else getattr(raw, "call_id", None)
    name = getattr(item, "tool_name", None) or (
        raw.get("name") if isinstance(raw, dict) else getattr(raw, "name", None))
    if isinstance(name, str) and isinstance(call_id, str):
        return getattr(item, "agent", None), name, call_id
    return None


def _note(agent: Any, name: str, call_id: str | None) -> None:
    try:
        ref: Any = weakref.ref(agent)
    except TypeError:  # no agent (or one without weak references): matches none
        return
    key = (id(agent), name, call_id)
    _WITNESSED[key] = ref
    _WITNESSED.move_to_end(key)
    while len(_WITNESSED) > MAX_ASKED * 4:
        _WITNESSED.popitem(last=False)


def witness_approvals() -> None:
    """Note every approval given in this process through the SDK (idempotent).

    ``RunContextWrapper.approve_tool`` is what ``RunState.approve``, a tool context, the
    run's ``on_approval`` callback and a hosted MCP ``on_approval_request`` call: each
    approval given here passes through it, noted per SDK agent, tool and call id (with
    ``always_approve=True``: every call of that agent's tool). An approval the run state
    holds that did not (it came with a saved state: written into the JSON, or given in
    another process) approves nothing (#29, fail closed).

    The SDK is changed only here, on the first fenced Agents SDK tool (never by importing
    icore), once per process: the wrapper carries :data:`WITNESS_MARK` and
    ``__wrapped__`` (the SDK's method), found anywhere in the chain of wrappers, so a
    reload of this module, a second copy of icore or a wrapper another library put on top
    never gets icore's wrapper twice. :func:`unwitness_approvals` takes it off again.
    """
    from agents.run_context import RunContextWrapper
    witness_rejections()  # a "no" given here is recorded by the run it reaches
    with _WITNESS_LOCK:
        if _ours(RunContextWrapper.approve_tool) is not None:
            return
        base = RunContextWrapper.approve_tool

        @functools.wraps(base)
        def approve_tool(self: Any, approval_item: Any, *args: Any, **kwargs: Any) -> None:
            # the SDK's own call first: an approval it refuses (raises) is never noted;
            # later SDK parameters pass through unchanged
            base(self, approval_item, *args, **kwargs)
            always = kwargs.get("always_approve", args[0] if args else False)
            key = _item_key(approval_item)
            if key is not None:
                with _WITNESS_LOCK:
                    _note(*key)
                    if always is True:
                        _note(key[0], key[1], None)

        setattr(approve_tool, WITNESS_MARK, True)
        RunContextWrapper.approve_tool = approve_tool  # type: ignore[method-assign]


def _ours(method: Any) -> Any:
    """Icore's wrapper in ``method``'s chain of ``__wrapped__`` (None: not wrapped)."""
    seen = 0
    while method is not None and seen < 64:  # a chain that loops ends here
        if getattr(method, WITNESS_MARK, False) is True:
            return method
        method, seen = getattr(method, "__wrapped__", None), seen + 1
    return None


def unwitness_approvals() -> bool:
    """Take icore's wrapper off ``RunContextWrapper.approve_tool``; True when it was on.

    Only when it is the outermost wrapper: under another library's wrapper it stays (that
    wrapper holds it as its base and restoring the SDK's method would drop it too), and
    False is returned. Approvals given after it is off are not noted, so a fenced tool's
    approved call fails closed until :func:`witness_approvals` runs again (the next
    fenced tool made).
    """
    from agents.run_context import RunContextWrapper
    with _WITNESS_LOCK:
        now = RunContextWrapper.__dict__.get("approve_tool")
        if now is None or getattr(now, WITNESS_MARK, False) is not True:
            return False
        RunContextWrapper.approve_tool = now.__wrapped__  # type: ignore[method-assign]
        return True


def witnessed(agent: Any, name: str, call_id: Any, *, consume: bool = False) -> bool:
    """Whether a human approved ``agent``'s call ``call_id`` of tool ``name`` here.

    In this process, through the SDK (or every call of it: ``always_approve=True``).
    ``consume``: the call is being judged under that approval, which is then used up (a
    later state naming the same call id is not approved by it again).
    """
    def mine(key: _Key) -> bool:
        ref = _WITNESSED.get(key)
        return ref is not None and ref() is agent

    with _WITNESS_LOCK:
        if mine((id(agent), name, None)):
            return True
        key = (id(agent), name, call_id)
        if not mine(key):
            return False
        if consume:
            _USED[key] = _WITNESSED.pop(key)
            _USED.move_to_end(key)
            while len(_USED) > MAX_ASKED * 4:
                _USED.popitem(last=False)
        return True


def used_elsewhere(agent: Any, name: str, call_id: Any) -> bool:
    """Whether an approval given here for this call was used up by another run of it."""
    with _WITNESS_LOCK:
        ref = _USED.get((id(agent), name, call_id))
        return ref is not None and ref() is agent


def unwitnessed_message(name: str, *, used: bool = False) -> str:
    """The model's text for a run state's approval that approves nothing here.

    ``used``: a human approved this call here, and another run of it (the saved run
    state resumed again) used that approval already; else the approval came only with
    a saved run state.
    """
    if used:
        return (f"PlanFence blocked {name} (approval_changed): the approval given for "
                f"this call in this process was used already by another run of it (the "
                f"same saved run state resumed again); one approval "
                f"runs one call, so nothing ran. Call {name} again to put it to the human.")
    return (f"PlanFence blocked {name} (approval_changed): the run state says a human "
            f"approved this call, but no approval of it was given in this process "
            f"(RunState.approve): an approval that came only with a saved run state "
            f"(edited, or given elsewhere) approves nothing here; nothing ran. Call "
            f"{name} again to put it to the human.")


def approved_call(tool: FunctionTool, ctx: ToolContext[Any]) -> bool:
    """Whether this call ran through the SDK's human approval."""
    if tool.needs_approval is False:
        return False
    if tool.needs_approval is True:
        return True
    return ctx.is_tool_approved(tool.name, ctx.tool_call_id) is True


def always_approved(tool: FunctionTool, ctx: ToolContext[Any]) -> bool:
    """Whether the human approved every call of the tool (``approve(always_approve=True)``).

    Read from the run context's approval records (not a public SDK API: when they cannot
    be read, False, and each call stays bound to its own request), and only when that
    approval was given in this process (:func:`witness_approvals`).
    """
    records = getattr(ctx, "_approval_records_for_key", None)
    if not callable(records):
        return False
    try:
        sticky = any(getattr(r, "approved", None) is True
                     for r in records(tool.name, call_id=ctx.tool_call_id))
    except Exception:
        return False
    agent = getattr(ctx, "agent", None)  # given here with always_approve=True, not only
    return sticky and witnessed(agent, tool.name, None)  # written in a saved state


def binding(base: FunctionTool, team: TeamAgent, guard: FenceGuard,
            norm: Callable[[Any], dict[str, Any]], turn_of: Callable[[Any], Hashable | None],
            asked: OrderedDict[Any, ApprovalRequest | None]) -> Callable[..., Any]:
    """The tool's ``needs_approval``, noting the request each call is put to the human as.

    The SDK asks it when the model's call arrives, before the human decides: the call's
    :class:`~icore.workspace.ApprovalRequest` (its normalised arguments and the versions of
    D(a) this agent read for the call's model turn) is noted under the tool-call id. Once
    approved, the call runs only as that exact request (same id); a replan (other
    arguments, or the same ones from other versions) is refused ``approval_changed``.
    A request that cannot be built (arguments that do not fit, an unread fact) is noted as
    None: the approved call is then refused (fail closed) unless the gate refuses it first.
    ``asked`` is the workspace agent's book for the tool (:func:`asked_book`).
    """
    policy = base.needs_approval

    async def needs_approval(wrapper: Any, params: Any, call_id: Any) -> bool:
        need = policy(wrapper, params, call_id) if callable(policy) else bool(policy)
        if inspect.isawaitable(need):
            need = await need
        if need is not True:
            return bool(need)
        req: ApprovalRequest | None = None
        try:
            args = norm(params)
            keys = guard.depends_on(args) if callable(guard.depends_on) else guard.depends_on
            req = team.request_for(base.name, args, keys, turn=turn_of(wrapper))
        except Exception:  # the gate refuses such a call with the real cause
            req = None
        with _BOOKS_LOCK:
            asked[call_id] = req
            asked.move_to_end(call_id)
            while len(asked) > MAX_ASKED:
                asked.popitem(last=False)
        if req is not None:  # for a RunState resumed in another process (QA qa-new16 S3)
            keep_request(team, base.name, call_id, req)
        proc = ACTIVE_PROCESSOR.get()
        if proc is not None:  # a run that stops here is paused, not ended
            proc.asking(call_id, base.name, params)
        return True

    return needs_approval


def keep_request(team: TeamAgent, name: str, call_id: Any, req: ApprovalRequest) -> None:
    """Keep the request a call is put to the human as in the ``Workspace.sqlite`` folder.

    So a run state saved with ``RunState.to_json`` and resumed in another process (the
    first one stopped while the human decided) finds the versions the call derives from
    (:func:`kept_request`). Nothing for an in-memory workspace; a file that cannot be
    written is logged (the resumed call then fails closed, ``not_read``).
    """
    if not isinstance(call_id, str) or not call_id:
        return
    rec = active_recorder()
    try:
        file = folder_pending(team)
        if file is not None:
            file.keep(kept_key(team, name, call_id), name, None, call_id,
                      rec.run_id if rec is not None else None, [req])
        note_asker(team, name, call_id, rec.run_id if rec is not None else None)
    except Exception as exc:  # housekeeping for a later restart: this run goes on
        _log.warning("the approval request of %s (call %s) was not kept on disk (%s): a "
                     "run state resumed in another process refuses it", name, call_id, exc)


def kept_request(team: TeamAgent, asked: OrderedDict[Any, ApprovalRequest | None],
                 name: str, call_id: Any) -> Any:
    """The request the human was asked for ``call_id`` (:data:`NOT_ASKED`: unknown here).

    Asked in this process: the book's. Else the request another process kept
    (:func:`keep_request`): its versions are noted as the agent's reads again
    (:func:`~icore.workspace.restore_reads`), so the approved call is validated against
    the owners' current heads as an in-process resume is (a head moved meanwhile:
    ``stale``). A kept row that cannot be read back, or whose versions cannot be
    fetched, leaves it :data:`NOT_ASKED` (refused, never run blind). The approval
    itself must still be given in this process (``RunState.approve``).
    """
    got = asked.get(call_id, NOT_ASKED)
    if got is not NOT_ASKED or not isinstance(call_id, str) or not call_id:
        return got
    try:
        file = folder_pending(team)
        pending = file.get(kept_key(team, name, call_id)) if file is not None else None
        if pending is None:
            return got
        req = pending.asked[-1]
        restore_reads(team, dict(req.basis))
    except Exception as exc:  # unreadable, pruned, an owner down: fail closed
        _log.warning("the approval request of %s (call %s) kept on disk cannot be used "
                     "(%s): the call is refused", name, call_id, exc)
        return got
    with _BOOKS_LOCK:
        asked[call_id] = req
    return req

