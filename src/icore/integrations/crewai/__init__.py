"""CrewAI drop-in (``pip install 'icore[crewai]'``). See docs/integrations-crewai.md.

* :func:`fenced_crewai_tool`: a ``BaseTool`` whose calls pass the PlanFence gate, plan
  roots from the crew's shared context, blocks as a ``ToolFailure`` result, replans
  written back into the context (planfence App. A.3);
* :class:`CrewRecorder`, :func:`recording`: event-bus listeners recording a crew run
  into the trace ``icore audit`` reads (icore Sec. 3).
"""

from icore._extras import require

require("crewai", "crewai", feature="icore.integrations.crewai")

from icore.integrations._context import ContextRoots  # noqa: E402
from icore.integrations.crewai._events import CrewRecorder, recording  # noqa: E402
from icore.integrations.crewai._tools import FencedCrewTool, fenced_crewai_tool  # noqa: E402

__all__ = ["ContextRoots", "CrewRecorder", "FencedCrewTool", "fenced_crewai_tool",
           "recording"]
