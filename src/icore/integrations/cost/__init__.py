"""The cost of the seam: the framework cases of ``icore bench integrations`` (issue 28).

:func:`seam_cases` builds one fenced-vs-unfenced case per installed framework (LangGraph,
OpenAI Agents SDK, AG2) on the in-process team it is handed (the seam benchmark's
``SeamWorld``, in the lab package); the benchmark's ``run_seam_bench`` times them with the
bare-fence cases.
A subpackage of its own, so the shared :mod:`icore.integrations` front door imports no
framework.
"""

from icore.integrations.cost._cases import FRAMEWORKS, FrameworkCase, World, seam_cases

__all__ = ["FRAMEWORKS", "FrameworkCase", "World", "seam_cases"]
