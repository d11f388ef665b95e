"""The run scope of a LangGraph / LangChain run: its thread (issue 28, reads per conversation).

A graph run with a checkpointer names its conversation in ``config["configurable"]
["thread_id"]``; code of the run (a tool of a ``ToolNode``, a node) finds it in the
config LangChain keeps in a context variable. Reads and calls of a workspace agent are
kept per thread, so a read made in one thread never authorizes a call made in another.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping

from langgraph.config import get_config


def graph_scope() -> Hashable | None:
    """``("langgraph", thread_id)`` of the graph run this code runs in.

    None outside a graph run, or in a run without a ``thread_id`` (then the reads are
    the agent's unscoped ones: give each conversation a thread or ``agent.scope(id)``).
    """
    try:
        config = get_config()
    except RuntimeError:  # not in a runnable context
        return None
    conf = config.get("configurable") if isinstance(config, Mapping) else None
    thread = conf.get("thread_id") if isinstance(conf, Mapping) else None
    if thread is None:
        return None
    return ("langgraph", thread if isinstance(thread, str | int) else str(thread))


__all__ = ["graph_scope"]
