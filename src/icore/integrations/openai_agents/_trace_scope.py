"""The run scope of an Agents SDK run: its trace (issue 28, reads per conversation).

Every ``Runner.run`` runs in a trace (a fresh one, unless the caller opened one around it
with ``agents.trace(...)``: then the runs in it share it, one workflow); the runs given
one ``RunConfig(group_id=...)`` (the SDK's conversation id) share it too. Reads and calls
of a workspace agent are kept per scope, so a read made in one run never authorizes a
call made in another run through the same agent handle.
"""

from __future__ import annotations

import itertools
import threading
import weakref
from collections.abc import Hashable
from typing import Any

from agents.tracing import get_current_trace

_NO_ID = "no-op"
_numbers: weakref.WeakKeyDictionary[Any, int] = weakref.WeakKeyDictionary()
_count = itertools.count(1)
_lock = threading.Lock()


def sdk_run_scope() -> Hashable | None:
    """The scope of the SDK run this code runs in: ``("openai_agents", trace_id)``.

    A trace with a ``group_id`` (``RunConfig(group_id=chat_id)``, the SDK's id linking the
    traces of one conversation) is scoped by it instead: the runs of one conversation
    share their reads (``("openai_agents", "group", group_id)``).

    A run whose trace has no id of its own (tracing disabled: the SDK's no-op trace, a
    new object per run) is told apart by that object (numbered while it lives). None
    outside any run.
    """
    trace = get_current_trace()
    if trace is None:
        return None
    group = getattr(trace, "group_id", None)
    if isinstance(group, str) and group:
        return ("openai_agents", "group", group)
    tid = getattr(trace, "trace_id", None)
    if isinstance(tid, str) and tid and tid != _NO_ID:
        return ("openai_agents", tid)
    try:
        with _lock:
            n = _numbers.get(trace)
            if n is None:
                n = _numbers[trace] = next(_count)
    except TypeError:  # not weak-referenceable: no scope we can tell apart
        return None
    return ("openai_agents", "untraced", n)


__all__ = ["sdk_run_scope"]
