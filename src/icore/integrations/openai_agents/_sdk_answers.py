"""A human's answer to a fenced Agents SDK call, recorded in the run where it is given.

The recording processor learns of a pause from its own state in its ``recording()``
block, so a rejection given to a ``RunState`` loaded in another process (or resumed in a
second block of one process) was not recorded at all: no "a human answered reject" line,
no refused call, and the audit never mentioned it (QA qa-new18a #2). The call itself
knows the request it was put to the human as (kept on disk for another process,
:mod:`icore.integrations._pending_file`), so:

* :func:`witness_rejections` notes each ``RunContextWrapper.reject_tool`` given in this
  process (as the approvals are noted); :func:`record_rejections` writes them, when the
  resumed run lists the fenced tool for its next model call, as the processor does: the
  human's decision (naming the tool, arguments and ``tool_call_id``), then the refused
  call (``decision: "reject"``). A call the block's processor saw paused is left to it.
* :func:`approval_line` is the approved call's line, with the ``resumed`` link
  (``{run, tool_call_id, request}``) when the request was asked in another run (#7), as
  the LangGraph integration writes it.
* :func:`store_refused` records a call refused because the attempts file failed
  (``store_failed``), so a trace holding the human's approval also holds its refusal.
"""

from __future__ import annotations

import functools
import json
import threading
import weakref
from collections import OrderedDict
from typing import Any

from icore.integrations import RunRecorder
from icore.integrations._pending_file import folder_pending
from icore.integrations._refusals import BEFORE_GATE_POLICY, refused_call
from icore.workspace import REJECTED, ApprovalRequest

STORE_FAILED = "store_failed"
"""The reason of a fenced call refused because its attempts file failed (nothing ran)."""
MAX_NOTED = 4096
"""Most rejections remembered until a run records them (older ones are dropped)."""
REJECT_MARK = "__icore_reject_witness__"
"""Attribute naming icore's wrapper of ``RunContextWrapper.reject_tool``."""

_REJECTED: OrderedDict[tuple[int, str, str], tuple[Any, Any]] = OrderedDict()
"""(id of the SDK agent, tool name, call id) -> (weak reference to the agent, the call's
arguments as the approval item carries them): rejections given here, not recorded yet."""
_LOCK = threading.Lock()
_ASKERS: OrderedDict[tuple[int, str, str], str] = OrderedDict()
"""(id of the workspace agent, tool name, call id) -> the run id that asked (this process)."""


def witness_rejections() -> None:
    """Note every rejection given in this process through the SDK (idempotent).

    Wraps ``RunContextWrapper.reject_tool`` once per process (the wrapper carries
    :data:`REJECT_MARK`; ``__wrapped__`` is the SDK's method); the SDK's own call runs
    first, so a rejection it refuses is never noted.
    """
    from agents.run_context import RunContextWrapper
    with _LOCK:
        method: Any = RunContextWrapper.reject_tool
        seen = 0
        while method is not None and seen < 64:
            if getattr(method, REJECT_MARK, False) is True:
                return
            method, seen = getattr(method, "__wrapped__", None), seen + 1
        base = RunContextWrapper.reject_tool

        @functools.wraps(base)
        def reject_tool(self: Any, approval_item: Any, *args: Any, **kwargs: Any) -> None:
            base(self, approval_item, *args, **kwargs)
            raw = getattr(approval_item, "raw_item", None)
            get = raw.get if isinstance(raw, dict) else functools.partial(getattr, raw)
            call_id, agent = get("call_id", None), getattr(approval_item, "agent", None)
            name = getattr(approval_item, "tool_name", None) or get("name", None)
            if not (isinstance(call_id, str) and isinstance(name, str)):
                return
            try:
                ref: Any = weakref.ref(agent)
            except TypeError:
                return
            with _LOCK:
                _REJECTED[(id(agent), name, call_id)] = (ref, get("arguments", None))
                while len(_REJECTED) > MAX_NOTED:
                    _REJECTED.popitem(last=False)

        setattr(reject_tool, REJECT_MARK, True)
        RunContextWrapper.reject_tool = reject_tool  # type: ignore[method-assign]


def kept_key(team: Any, name: str, call_id: Any) -> str:
    """The key of the request ``team``'s call ``call_id`` of ``name`` was kept under."""
    return f"openai_agents:{getattr(team, 'name', None)}:{name}:{call_id}"


def decided(wrapper: Any, tool: str, call_id: str) -> Any:
    """The SDK's decision on the call ``call_id`` (True, False: rejected, None: open)."""
    try:
        return wrapper.is_tool_approved(tool, call_id)
    except Exception:  # not a run context that knows approvals
        return None


def rejection_text(wrapper: Any, tool: str, call_id: str) -> str:
    """What the SDK answers a rejected call with (the human's message, else its default)."""
    try:
        said = wrapper.get_rejection_message(tool, call_id)
    except Exception:
        said = None
    if isinstance(said, str):
        return said
    from agents.tool import DEFAULT_APPROVAL_REJECTION_MESSAGE
    return DEFAULT_APPROVAL_REJECTION_MESSAGE


def note_asker(team: Any, name: str, call_id: Any, run: str | None) -> None:
    """Note that run ``run`` put ``team``'s call ``call_id`` of ``name`` to the human."""
    if isinstance(call_id, str) and run is not None:
        with _LOCK:
            _ASKERS[(id(team), name, call_id)] = run
            while len(_ASKERS) > MAX_NOTED:
                _ASKERS.popitem(last=False)


def asked_in(team: Any, name: str, call_id: Any, key: str) -> str | None:
    """The run id that asked the call (this process's note, else the kept row's run)."""
    with _LOCK:
        run = _ASKERS.get((id(team), name, call_id)) if isinstance(call_id, str) else None
    if run is not None or team is None:
        return run
    try:
        file = folder_pending(team)
        pending = file.get(key) if file is not None else None
    except Exception:  # unreadable: no link (the call itself is refused elsewhere)
        return None
    return pending.run if pending is not None else None


def _link(rec: RunRecorder, team: Any, name: str, call_id: str, key: str,
          request: str | None) -> tuple[str, dict[str, Any]]:
    """The text suffix and ``resumed`` field of an answer to a call asked in another run."""
    run = asked_in(team, name, call_id, key)
    if run is None or run == rec.run_id:
        return "", {}
    return (f" (resumed approval for call {call_id} asked in run {run})",
            {"resumed": {"run": run, "tool_call_id": call_id, "request": request}})


def approval_line(rec: RunRecorder, who: str, team: Any, name: str, call_id: str,
                  key: str, input_json: str, want: Any) -> None:
    """Record the human's approval of the call (before its gate decides)."""
    request = want.id if isinstance(want, ApprovalRequest) else None
    text, extra = _link(rec, team, name, call_id, key, request)
    rec.add(who, "thought", f"a human approved {name} {input_json}{text}",
            tool_call_id=call_id, approval={"tool": name, "approved": True,
                                            "request": request}, **extra)


def _is_object(text: Any) -> bool:
    try:
        return isinstance(json.loads(text), dict)
    except (TypeError, ValueError, RecursionError):
        return False


def record_rejections(rec: RunRecorder | None, wrapper: Any, agent: Any, name: str,
                      team: Any, proc: Any) -> None:
    """Record the human's rejections of ``agent``'s calls of ``name`` (see the module).

    Called when the run lists the fenced tool for a model call (``wrapper``: the run
    context, which holds the SDK's decisions). ``proc``: the ``recording()`` block's
    processor (None: none); a call it saw the run pause on is its to record
    (``proc.rejected`` / its next model input). Every other rejection given here (a
    ``RunState`` loaded in a new process, a second block) is recorded once, by the first
    run that lists the tool after it: the human's decision naming the tool, arguments
    and ``tool_call_id`` (and the ``resumed`` link when asked in another run), then the
    refused call (``decision: "reject"``).
    """
    def said(cid: str) -> Any:
        return decided(wrapper, name, cid)

    def text(cid: str) -> str:
        return rejection_text(wrapper, name, cid)

    seen = proc.paused_calls() if proc is not None else frozenset()
    if proc is not None:
        proc.rejected(name, said, text)
    if rec is None:
        return
    with _LOCK:
        mine = [(k, v) for k, v in _REJECTED.items()
                if k[0] == id(agent) and k[1] == name and v[0]() is agent]
    for (aid, tool, cid), (_, raw) in mine:
        if said(cid) is not False:
            continue
        with _LOCK:
            if _REJECTED.pop((aid, tool, cid), None) is None:
                continue  # another run recorded it meanwhile
        if cid in seen:
            continue
        args = json.loads(raw) if _is_object(raw) else None
        who = getattr(agent, "name", None) or "agent"
        link, extra = _link(rec, team, name, cid, kept_key(team, name, cid), None)
        rec.add(who, "thought", f"a human answered reject for {name} "
                f"{json.dumps(args, default=str)}{link}", answered_by="human",
                decision="reject", tool=name, args=args, tool_call_id=cid, **extra)
        refused_call(rec, who, name, args, text(cid), reason=REJECTED,
                     policy="approval", answered_by="sdk", decision="reject",
                     tool_call_id=cid)


def still_waiting(proc: Any, ctx: Any, team: Any, book: Any, name: str) -> None:
    """Tell the block's processor which calls of ``name`` still wait for the human.

    A run resumed from a ``RunState`` that answers only some of its pending approvals
    pauses again on the others, but the SDK does not ask their ``needs_approval`` again
    nor open a span for them, so a processor of a new block (a new process) never learned
    of them: its trace had no pause line and the audit said "did not end" (QA qa-new18a
    #5). An approved call of the run (``ctx``) names them: the run's tool calls not run
    yet (the SDK's invocation records, read defensively: not a public API) that the SDK
    has no decision for and that were put to the human as this tool's (the request in
    ``book``, this process's, or kept on disk).
    """
    if proc is None:
        return
    try:
        calls = [cid for cid, inv in dict(getattr(ctx, "_tool_invocations", {})).items()
                 if getattr(inv, "executed", True) is False]
    except Exception:  # another SDK version: no pause line, as before
        return
    for cid in calls:
        if cid == getattr(ctx, "tool_call_id", None) or ctx.is_tool_approved(
                name, cid) is not None or cid in proc.paused_calls():
            continue
        req = book.get(cid) if isinstance(cid, str) else None
        if req is None and team is not None:
            try:
                file = folder_pending(team)
                pending = file.get(kept_key(team, name, cid)) if file is not None else None
            except Exception:  # unreadable: that call is refused when it is resumed
                pending = None
            req = pending.asked[-1] if pending is not None else None
        if isinstance(req, ApprovalRequest):
            proc.asking(cid, name, dict(req.args))


def store_refused(rec: RunRecorder | None, who: str, name: str, input_json: str,
                  exc: BaseException) -> None:
    """Record a call refused because the attempts file failed (the error is raised)."""
    if rec is None:
        return
    args = json.loads(input_json) if _is_object(input_json) else None
    refused_call(rec, who, name, args, f"PlanFence blocked {name} ({STORE_FAILED}): {exc}",
                 reason=STORE_FAILED, policy=BEFORE_GATE_POLICY)


__all__ = ["MAX_NOTED", "REJECT_MARK", "STORE_FAILED", "approval_line", "asked_in",
           "decided", "kept_key", "note_asker", "record_rejections", "rejection_text",
           "still_waiting", "store_refused", "witness_rejections"]
