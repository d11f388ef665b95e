"""OpenAI Agents SDK drop-in (``pip install 'icore[openai-agents]'``).

See docs/integrations-openai-agents.md.

* :func:`fenced_function_tool`: a ``FunctionTool`` whose calls pass the PlanFence gate,
  plan roots from the run context, blocks as the tool's error output, replans written
  back into the context (planfence App. A.3);
* :class:`RecordingProcessor`, :func:`recording`: a tracing processor recording runs
  into the trace ``icore audit`` reads (icore Sec. 3).
"""

from icore._extras import require

require("agents", "openai-agents", feature="icore.integrations.openai_agents")

from icore.integrations._context import ContextRoots  # noqa: E402
from icore.integrations.openai_agents._tools import (  # noqa: E402
    AgentsActionBlocked,
    fenced_function_tool,
)
from icore.integrations.openai_agents._tracing import (  # noqa: E402
    RecordingProcessor,
    recording,
)

__all__ = ["AgentsActionBlocked", "ContextRoots", "RecordingProcessor", "fenced_function_tool",
           "recording"]
