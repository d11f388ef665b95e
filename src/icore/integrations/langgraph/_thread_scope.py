"""The run scope of a LangGraph / LangChain run: its conversation (issue 28, reads per run).

A graph run with a checkpointer names its conversation in ``config["configurable"]
["thread_id"]``; code of the run (a tool of a ``ToolNode``, a node) finds it in the
config LangChain keeps in a context variable. Reads and calls of a workspace agent are
kept per scope, so a read made in one conversation never authorizes a call made in
another:

- a thread of a checkpointer: ``("langgraph", saver, thread_id)``, the saver numbered by
  identity (two graphs with their own checkpointers that both use the tutorial
  ``thread_id "1"`` are two conversations, QA qa-fw7 S1); the turns of one conversation
  (invocations on one thread of one checkpointer) share their reads;
- otherwise (no ``thread_id``, or no checkpointer: LangGraph keeps no conversation) the
  root invocation is its own scope, ``("langgraph", "run", n)``, as the Agents SDK
  integration scopes each ``Runner.run``. The root is told by the run's
  ``Runtime.control`` (one per root invocation, shared by its subgraphs).

Two root invocations on one thread of one checkpointer at the same time (a web service
reusing one id for every request) cannot be told apart: :func:`check_graph_scope`
refuses a protected call whose scope another invocation used since this one began.
"""

from __future__ import annotations

import itertools
import threading
import weakref
from collections import OrderedDict
from collections.abc import Hashable, Mapping
from typing import Any

from langgraph.config import get_config

from icore.errors import IntegrationError

_numbers: weakref.WeakKeyDictionary[Any, int] = weakref.WeakKeyDictionary()
_count = itertools.count(1)
_ticks = itertools.count(1)
_lock = threading.Lock()
_roots: OrderedDict[int, tuple[Any, int]] = OrderedDict()
"""id(control) -> (control, number) of the latest root invocations (held: ids not reused)."""
_ROOTS_KEPT = 4096
_uses: OrderedDict[Hashable, dict[int, tuple[int, int]]] = OrderedDict()
"""Per thread scope: root number -> (first use, last use) of its latest invocations (the
scopes used most recently; one idle longest is forgotten past :data:`_SCOPES_KEPT`)."""
_SCOPES_KEPT = 16384
_USES_KEPT = 64


def _number(obj: Any) -> int | None:
    """A number for ``obj`` while it lives (identity, never reused); None if not weak."""
    try:
        with _lock:
            n = _numbers.get(obj)
            if n is None:
                n = _numbers[obj] = next(_count)
    except TypeError:
        return None
    return n


def _conf() -> Mapping[str, Any] | None:
    try:
        config = get_config()
    except RuntimeError:  # not in a runnable context
        return None
    conf = config.get("configurable") if isinstance(config, Mapping) else None
    return conf if isinstance(conf, Mapping) else None


def _root(conf: Mapping[str, Any]) -> int | None:
    """The number of the root invocation this code runs in; None outside a graph.

    ``RunControl`` takes no weak reference: the latest ones are held (so an id is never
    reused while its number is known); one evicted after 4096 newer invocations and
    still running gets a new number (its later reads then back none of its earlier ones:
    fail closed).
    """
    control = getattr(conf.get("__pregel_runtime"), "control", None)
    if control is None:
        return None
    with _lock:
        got = _roots.get(id(control))
        if got is not None and got[0] is control:
            _roots.move_to_end(id(control))
            return got[1]
        n = next(_count)
        _roots[id(control)] = (control, n)
        while len(_roots) > _ROOTS_KEPT:
            _roots.popitem(last=False)
    return n


def _where() -> tuple[tuple[Any, ...] | None, int | None]:
    """(scope, root) of the code running now (both None outside any run)."""
    conf = _conf()
    if conf is None:
        return None, None
    root = _root(conf)
    thread = conf.get("thread_id")
    saver = conf.get("__pregel_checkpointer")
    if thread is not None:
        tid = thread if isinstance(thread, str | int) else str(thread)
        if saver is not None:
            n = _number(saver)
            return ("langgraph", n if n is not None else id(saver), tid), root
        if root is None:  # a tool invoked with a config outside any graph
            return ("langgraph", "thread", tid), None
    if root is None:
        return None, None
    return ("langgraph", "run", root), root


def graph_scope() -> Hashable | None:
    """The scope of the graph run this code runs in (see the module doc); None outside.

    Each time it names a thread scope it notes that the root invocation used it (for
    :func:`check_graph_scope`).
    """
    scope, root = _where()
    if scope is not None and root is not None and scope[1] != "run":
        tick = next(_ticks)
        with _lock:
            uses = _uses.setdefault(scope, {})
            _uses.move_to_end(scope)
            while len(_uses) > _SCOPES_KEPT:
                _uses.popitem(last=False)
            uses[root] = (uses.get(root, (tick, tick))[0], tick)
            if len(uses) > _USES_KEPT:  # the invocations used longest ago
                for k in sorted(uses, key=lambda k: uses[k][1])[:len(uses) - _USES_KEPT]:
                    del uses[k]
    return scope


def check_graph_scope(tool: str) -> None:
    """Refuse a protected call whose thread another root invocation used meanwhile.

    Two invocations on one ``thread_id`` of one checkpointer that overlap in time share
    one scope: a read of either would back the other's call. When another invocation
    used this call's scope after this invocation first did, the call is refused.

    Raises:
        IntegrationError: the case above (names the tool, the thread and the fix).
    """
    scope, root = _where()
    if scope is None or root is None or scope[1] == "run":
        return
    graph_scope()  # this call is a use too
    with _lock:
        uses = dict(_uses.get(scope, {}))
    mine = uses.get(root)
    if mine is None:
        return
    if any(n != root and last > mine[0] for n, (_f, last) in uses.items()):
        raise IntegrationError(
            "two graph invocations use one thread_id of one checkpointer at the same "
            "time: their reads cannot be told apart, so this protected call is refused "
            "(fail closed)", framework="langgraph", tool=tool, thread_id=str(scope[2]),
            fix="give each concurrent conversation its own thread_id, or run the turns "
                "of one thread one after another")


__all__ = ["check_graph_scope", "graph_scope"]
