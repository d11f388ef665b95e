"""An approved Agents SDK call runs once, however often its saved run is resumed (#28).

The SDK runs a call its human approved each time a ``RunState`` holding it is resumed:
one saved ``to_string()`` resumed twice (a retried or double-clicked "approve" handler)
ran ``cancel`` twice for one model call (QA qa-new12 S2). A fenced tool keeps each such
call in a :class:`~icore.integrations._call_ledger.CallLedger` keyed by :func:`call_key`
(the run's trace, which a resumed run keeps; the calling agent; the SDK's tool-call id;
the arguments): a later run of it answers with the first run's result or refusal,
recorded as one ``replay`` thought line (no decision, no approval: the audit counts one
action); one whose first run is still going or ended with its outcome unknown is refused
:data:`~icore.integrations._call_ledger.RETRY_UNKNOWN`. As the LangGraph integration
answers a re-run step (CHANGELOG, QA qa-new11 S2).
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Hashable, Mapping
from typing import Any

from agents.tracing import get_current_trace

from icore.integrations._approvals import canon
from icore.integrations._call_ledger import RETRY_UNKNOWN, STARTED, CallLedger, Earlier
from icore.integrations._recorder import RunRecorder
from icore.integrations._refusals import refusal_head

_NO_TRACE = "no-op"
"""The trace id of the SDK's no-op trace (tracing disabled)."""
_LEDGERS: weakref.WeakKeyDictionary[Any, dict[str, CallLedger]] = weakref.WeakKeyDictionary()
_LEDGERS_LOCK = threading.Lock()


def ledger_of(owner: Any, name: str) -> CallLedger:
    """The approved calls of tool ``name`` run through ``owner``, however often it is built.

    ``owner``: its workspace agent, or fence (held weakly).

    An app that builds its fenced tools for each request (resuming a saved run state in
    a new request, same process) still runs an approved call once when the saved state
    is resumed twice (QA qa-new15a S2). An owner that cannot be held weakly gets a
    ledger of its own (per fenced tool, as before).
    """
    with _LEDGERS_LOCK:
        try:
            per = _LEDGERS.get(owner)
            if per is None:
                per = _LEDGERS[owner] = {}
        except TypeError:
            return CallLedger()
        return per.setdefault(name, CallLedger())


def call_key(ctx: Any, args: Mapping[str, Any]) -> Hashable | None:
    """The identity of an SDK tool call across runs of its saved state (None: unknown).

    ``(trace id, calling agent, tool-call id, canonical arguments)``. A resumed run
    continues its trace (same id), so every resume of one saved state gives one key; two
    runs started afresh have two traces. An untraced run (no trace id) is keyed by the
    call alone (the SDK's call ids are unique per model call).
    """
    call_id = getattr(ctx, "tool_call_id", None)
    if not isinstance(call_id, str) or not call_id:
        return None
    tid = getattr(get_current_trace(), "trace_id", None)
    scope = tid if isinstance(tid, str) and tid and tid != _NO_TRACE else None
    who = getattr(getattr(ctx, "agent", None), "name", None)
    return (scope, who if isinstance(who, str) else None, call_id, canon(dict(args)))


def again_message(name: str, call_id: str, earlier: Earlier) -> str:
    """The model's text for a call whose earlier run's outcome is not known (yet)."""
    head = refusal_head(name, RETRY_UNKNOWN)
    if earlier.how == STARTED:
        return (f"{head}: this call ({call_id}) is running right now under the human's "
                f"approval, in another run of the same saved run state (the run was "
                f"resumed twice); it is not run twice, and nothing ran here. Its outcome "
                f"is that run's: check it before calling {name} again")
    return (f"{head}: this call ({call_id}) already ran once under the human's approval, "
            f"in an earlier run of the same saved run state, and ended without a known "
            f"outcome ({str(earlier.value)[:300]}); it may have had its effect, so it is "
            f"not run twice. Nothing ran now. Check whether it took effect before calling "
            f"{name} again, or report the unknown outcome")


def record_replay(rec: RunRecorder | None, who: str, name: str, args: Any, call_id: str,
                  said: Any, reason: str | None = None) -> None:
    """Record a call answered from its earlier run: one ``replay`` thought line.

    No decision and no approval line: the call's action was recorded by its first run,
    and the audit counts it once. ``reason``: the refusal's, when this run was refused
    (:data:`~icore.integrations._call_ledger.RETRY_UNKNOWN`).
    """
    if rec is None:
        return
    extra: dict[str, Any] = {"reason": reason} if reason is not None else {}
    how = ("was answered by an earlier run of the same saved run state, not run again"
           if reason is None else "is not run again (refused)")
    rec.add(who, "thought", f"replayed {name}: call {call_id} {how}: {str(said)[:200]}",
            tool=name, args=args, tool_call_id=call_id, replay=True, **extra)


__all__ = ["again_message", "call_key", "ledger_of", "record_replay"]
