"""AG2 drop-in (``pip install 'icore[ag2]'``: the ``ag2.Agent`` API of ag2 1.x).

See docs/integrations-ag2.md.

* :func:`fenced_tool`: an ``ag2`` tool whose calls pass the PlanFence gate in its
  innermost tool middleware (after every human answer), blocks as the tool's error,
  human approvals bound to the approved arguments (planfence App. A.3);
* :func:`record_agents`, :class:`ChatRecorder`: agent middleware recording a run into the
  trace ``icore audit`` reads, one end per run (icore Sec. 3);
* :data:`ContextRoots`: low-level, where L(a) comes from (a ``context.variables`` key or
  a function of the context and the arguments).
"""

from icore import _extras

_extras.require_version("ag2", "ag2", "1.2", feature="icore.integrations.ag2")

from icore.integrations._context import ContextRoots  # noqa: E402
from icore.integrations.ag2._hooks import ChatRecorder, record_agents  # noqa: E402
from icore.integrations.ag2._tools import fenced_tool  # noqa: E402

__all__ = ["ChatRecorder", "ContextRoots", "fenced_tool", "record_agents"]
