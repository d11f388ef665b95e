"""Waiting for a step's checkpoint to be saved (QA qa-new17c #2).

LangGraph's default durability (``"async"``) saves a step's checkpoint in the background
while the step's tasks run; a protected call placing its thread's reads on its own
checkpoint line (:mod:`._thread_scope`) first waits for that checkpoint. The save takes
as long as the state takes to serialize and store: a tool argument of megabytes through a
SQLite-backed saver took more than the fixed 2 s this wait used to allow, and the call
was refused with a message about concurrent conversations that did not fit (one thread,
nothing concurrent). The wait is now on the save itself where LangGraph exposes it (the
running loop's pending save: done, or failed with the saver's error), polled otherwise,
bounded by :data:`SAVE_WAIT_S`; a checkpoint still unsaved then is refused as such
(:class:`Unsaved`), never as a concurrency problem. Reads the clock; no other I/O than
the saver's.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import json
import time
from collections.abc import Hashable, Mapping
from dataclasses import dataclass
from typing import Any

from langgraph.checkpoint.memory import InMemorySaver

from icore.errors import IntegrationError, brief

SAVE_WAIT_S = 60.0
"""Longest wait, in seconds, for a step's own checkpoint to be saved before a protected
call of that step is refused (fail closed). Generous: a save is expected to end, and one
that fails ends the wait at once when LangGraph's pending save can be seen."""
LOOP_WAIT_S = 2.0
"""The bound instead on a thread running an asyncio event loop (an async tool under
``ainvoke``): the wait blocks that loop, and an async saver's pending save may run on it,
so waiting longer cannot help (seconds)."""
_FIRST_POLL_S, _MAX_POLL_S = 0.005, 0.25

Link = tuple[str | None, Any, Any]
"""(parent checkpoint id, source, run_id) of a saved checkpoint."""


@dataclass(frozen=True, slots=True)
class Unsaved:
    """Why a checkpoint is not saved after waiting.

    Attributes:
        waited_s: how long the wait lasted, seconds.
        failed: the saver's error (``Type: message``) when the save failed; empty when it
            simply had not finished within :data:`SAVE_WAIT_S`.
    """

    waited_s: float
    failed: str = ""

    def error(self, tool: str, thread: Any, at: str, args: Any = None,
              durability: Any = None) -> IntegrationError:
        """The refusal of ``tool``'s call whose checkpoint ``at`` is not saved.

        Says what happened (the save failed, did not end within the time waited, or
        ``durability="exit"`` saves none) and the size of the call's arguments (JSON,
        bytes) when given; never a concurrency problem (QA qa-new17c #2).
        """
        try:
            size = len(json.dumps(args, default=str).encode()) if args is not None else None
        except (TypeError, ValueError, RecursionError):
            size = None
        sized = f"; the call's arguments are {size:,} bytes of JSON" if size else ""
        if durability == "exit":
            why, fix = ("durability='exit' saves no checkpoint of a step, so the thread's "
                        "reads cannot be placed on this call's line",
                        "run the graph with durability='async' (the default) or 'sync'")
        elif self.failed:
            why, fix = (f"the checkpointer failed to save it ({self.failed}){sized}",
                        "keep the graph state within what the checkpointer can store (see "
                        "its error: e.g. a value it cannot serialize, such as an integer "
                        "over 64 bits in the model's arguments, or a value over its size "
                        "limit), then run the turn again")
        else:
            why, fix = (f"the checkpointer had not saved it after {self.waited_s:.1f} s "
                        f"(the wait's bound){sized}",
                        "keep large payloads out of the graph state (store them and pass "
                        "a reference), or use a faster checkpointer; then run the turn "
                        "again")
        return IntegrationError(
            f"this call's checkpoint is not saved: {why}; its thread's reads cannot be "
            "placed on its checkpoint line, so this protected call is refused (fail "
            "closed, nothing ran)", framework="langgraph", tool=tool,
            thread_id=str(thread), checkpoint_id=at, waited_s=round(self.waited_s, 3),
            fix=fix)


def link(saver: Any, tid: Hashable, at: str, ns: str = "") -> Link | None:
    """(parent id, source, run_id) of checkpoint ``at`` of thread ``tid``; None: not saved.

    ``run_id``: the metadata ``run_id`` of the invocation that saved it (LangGraph copies
    the invocation's ``config["metadata"]`` into each checkpoint), None when not given.

    ``ns`` is the graph namespace (``""``: the root graph's checkpoints).

    ``InMemorySaver`` itself (not a subclass) is read without loading the checkpoint's
    channel values (``get_tuple`` would, costing a copy of the whole state per step
    walked); any other saver answers through ``get_tuple``.
    """
    if type(saver) is InMemorySaver:
        per: Any = saver.storage.get(tid)  # type: ignore[call-overload]
        saved = (per or {}).get(ns, {}).get(at)
        if saved is None:
            return None
        meta = saver.serde.loads_typed(saved[1]) or {}
        return saved[2], meta.get("source"), meta.get("run_id")
    got = saver.get_tuple({"configurable": {"thread_id": tid, "checkpoint_ns": ns,
                                            "checkpoint_id": at}})
    if got is None:
        return None
    parent = (got.parent_config or {}).get("configurable", {}).get("checkpoint_id")
    meta = got.metadata or {}
    return parent, meta.get("source"), meta.get("run_id")


def _on_event_loop() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def _pending_save(conf: Mapping[str, Any] | None) -> concurrent.futures.Future[Any] | None:
    """The running LangGraph loop's latest checkpoint save, when it can be found.

    A task's ``configurable`` holds the runner's ``__pregel_call`` (a ``partial`` whose
    ``schedule_task`` is the loop's bound method); the loop keeps its pending save in
    ``_put_checkpoint_fut``. Not a public API: None whenever any of it is missing (the
    wait then polls the saver).
    """
    call = conf.get("__pregel_call") if isinstance(conf, Mapping) else None
    if not isinstance(call, functools.partial):
        return None
    loop = getattr(call.keywords.get("schedule_task"), "__self__", None)
    fut = getattr(loop, "_put_checkpoint_fut", None)
    return fut if isinstance(fut, concurrent.futures.Future) else None


def await_saved(saver: Any, tid: Hashable, at: str, ns: str = "",
                conf: Mapping[str, Any] | None = None, *,
                limit_s: float | None = None) -> Link | Unsaved:
    """Checkpoint ``at``'s link once it is saved, or :class:`Unsaved`.

    Polls the saver (5 ms, doubling up to 250 ms) for at most ``limit_s`` seconds
    (default :data:`SAVE_WAIT_S`; :data:`LOOP_WAIT_S` on an event loop's thread); with
    ``conf`` (the task's ``configurable``) it waits
    on LangGraph's pending save between polls and stops at once when that save failed.

    Raises:
        Exception: whatever the saver raises when read (the caller fails closed).
    """
    limit = SAVE_WAIT_S if limit_s is None else limit_s
    if limit_s is None and _on_event_loop():  # an async graph's save may need this loop
        limit = min(limit, LOOP_WAIT_S)
    got = link(saver, tid, at, ns)
    if got is not None:
        return got
    start, pause = time.monotonic(), _FIRST_POLL_S
    fut = _pending_save(conf) if not ns else None
    while True:
        waited = time.monotonic() - start
        if fut is not None and fut.done():
            exc = fut.exception()
            got = link(saver, tid, at, ns)
            if got is not None:
                return got
            if exc is not None:
                return Unsaved(waited, f"{type(exc).__name__}: {brief(str(exc), 200)}")
            fut = None  # saved another checkpoint: poll on
        if waited >= limit:
            return Unsaved(waited)
        step = min(pause, limit - waited)
        if fut is not None:
            concurrent.futures.wait([fut], timeout=step)
        else:
            time.sleep(step)
        pause = min(pause * 2, _MAX_POLL_S)
        got = link(saver, tid, at, ns)
        if got is not None:
            return got


__all__ = ["LOOP_WAIT_S", "SAVE_WAIT_S", "Unsaved", "await_saved", "link"]
