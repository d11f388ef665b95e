"""CrewAI drop-in (``pip install 'icore[crewai]'``). See docs/integrations-crewai.md.

* :func:`fenced_crewai_tool`: a ``BaseTool`` whose calls pass the PlanFence gate: the
  agent's own call is the plan, derived from what the agent read before the model
  message that proposed it (or, low-level, plan roots from the crew's shared context);
  blocks as a ``ToolFailure`` result; ``approve=`` puts an authorized call to a human and
  validates it again after the answer (planfence App. A.3);
* :class:`CrewActionBlocked`, :class:`CrewSetupError`: what reaches the application out
  of ``kickoff()`` (``on_block="raise"``; a setup mistake found at a call);
* :func:`install_hooks`: the CrewAI hooks that number each executor's model calls (run
  when this package is imported; again after clearing CrewAI's global hooks);
* :class:`CrewRecorder`, :func:`recording`: event-bus listeners recording a crew run
  into the trace ``icore audit`` reads (icore Sec. 3).
"""

from icore._extras import require

require("crewai", "crewai", feature="icore.integrations.crewai")

from icore.integrations._context import ContextRoots  # noqa: E402
from icore.integrations.crewai._events import CrewRecorder, recording  # noqa: E402
from icore.integrations.crewai._tools import FencedCrewTool, fenced_crewai_tool  # noqa: E402
from icore.integrations.crewai._turns import (  # noqa: E402
    CrewActionBlocked,
    CrewSetupError,
    install_hooks,
)

install_hooks()  # before any CrewAI agent is built: executors copy the LLM hooks

__all__ = ["ContextRoots", "CrewActionBlocked", "CrewRecorder", "CrewSetupError",
           "FencedCrewTool", "fenced_crewai_tool", "install_hooks", "recording"]
