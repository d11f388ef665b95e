"""LangGraph drop-in (``pip install 'icore[langgraph]'``).

Fenced tools, recorded runs, a checkpointer and a store over icore records. See
docs/integrations-langgraph.md.

* :func:`fenced_tool`: a ``StructuredTool`` whose calls pass the PlanFence gate, plan
  roots from graph state, blocks as ``ToolMessage(status="error")``, replans written back
  with a ``Command`` (planfence App. A.3);
* :func:`recorded_node`, :class:`RecordingHandler`: a run into the trace ``icore audit``
  reads (icore Sec. 3);
* :class:`RecordCheckpointSaver`: ``BaseCheckpointSaver`` whose checkpoints are icore
  records (passes ``langgraph-checkpoint-conformance``);
* :class:`RecordStore`: ``BaseStore`` over owner memory (versioned, owner-checked).
"""

from icore._extras import require

require("langgraph.graph", "langgraph", feature="icore.integrations.langgraph")

from icore.integrations.langgraph._checkpoint import RecordCheckpointSaver  # noqa: E402
from icore.integrations.langgraph._fenced_node import RootsFrom, StateUpdate  # noqa: E402
from icore.integrations.langgraph._record_store import RecordStore  # noqa: E402
from icore.integrations.langgraph._recorded_node import recorded_node  # noqa: E402
from icore.integrations.langgraph._recording import RecordingHandler  # noqa: E402
from icore.integrations.langgraph._tools import fenced_tool, is_fenced  # noqa: E402

__all__ = [
    "RecordCheckpointSaver",
    "RecordStore",
    "RecordingHandler",
    "RootsFrom",
    "StateUpdate",
    "fenced_tool",
    "is_fenced",
    "recorded_node",
]
