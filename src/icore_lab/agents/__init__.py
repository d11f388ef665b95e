"""The lab's agent teams: the iCORE controlled evaluation (icore Sec. 5, issue 6).

Simulated heterogeneous agents (:class:`SimTeam`, :class:`SimEnvironment`,
:class:`SimWorld`, :func:`introduce`) and the LLM team (:class:`LLMTeam`, endpoint in
:class:`icore.agents.LLMSettings`), hosts of the iCORE-Audit loop (:mod:`icore.audit`).

Import rule: imports the library's front doors and :mod:`icore_lab.workloads` only.
"""

from icore_lab.agents._llm_team import LLMTeam
from icore_lab.agents._sim_world import SimWorld
from icore_lab.agents._simulated import SimEnvironment, SimTeam, introduce

__all__ = ["LLMTeam", "SimEnvironment", "SimTeam", "SimWorld", "introduce"]
