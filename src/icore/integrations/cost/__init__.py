"""The cost of the seam: the framework cases of ``icore bench integrations`` (issue 28).

:func:`seam_cases` builds one fenced-vs-unfenced case per installed framework (LangGraph,
OpenAI Agents SDK, AG2) plus the bare-fence cases, on the in-process team of
:class:`icore.bench.micro.SeamWorld`; :func:`icore.bench.micro.run_seam_bench` times them.
A subpackage of its own, so the shared :mod:`icore.integrations` front door imports no
framework.
"""

from icore.integrations.cost._cases import seam_cases

__all__ = ["seam_cases"]
