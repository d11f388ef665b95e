"""AG2 drop-in (``pip install 'icore[ag2]'``: the ConversableAgent API of ag2 0.9-0.14).

See docs/integrations-ag2.md.

* :func:`fenced_function`: the function an AG2 executor runs, gated by PlanFence, plan
  roots from the chat's ``ContextVariables``, blocks as the function's error reply,
  replans written back into the context (planfence App. A.3);
* :func:`record_agents`, :class:`ChatRecorder`: message hooks recording a chat into the
  trace ``icore audit`` reads (icore Sec. 3).
"""

from icore._extras import require

require("autogen", "ag2", feature="icore.integrations.ag2")

from icore.integrations._context import ContextRoots  # noqa: E402
from icore.integrations.ag2._hooks import ChatRecorder, record_agents  # noqa: E402
from icore.integrations.ag2._tools import fenced_function  # noqa: E402

__all__ = ["ChatRecorder", "ContextRoots", "fenced_function", "record_agents"]
