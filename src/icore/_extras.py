"""Optional extras: import a dependency that an extra brings, or fail with a one-line hint.

``pip install icore`` brings what records, memory, fence, net and state need. Benchmarks
(numpy, scipy, matplotlib) and each framework integration are extras; code that needs one
calls :func:`require`, so a missing extra fails with ``pip install 'icore[<extra>]'``
instead of a bare ``ModuleNotFoundError`` deep in a traceback.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from icore.errors import MissingExtra


def require(module: str, extra: str, *, feature: str = "") -> ModuleType:
    """Import ``module``; if it is missing, raise a one-line install hint.

    Args:
        module: dotted module name (``"numpy"``, ``"langgraph.graph"``).
        extra: the icore extra that installs it (``"bench"``, ``"langgraph"``).
        feature: what needs it, for the message (default: the extra's name).

    Returns:
        The imported module.

    Raises:
        MissingExtra: ``module`` (or a module it imports) is not installed.
    """
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        missing = exc.name or module
        raise MissingExtra(
            f"{feature or 'icore[' + extra + ']'} needs {missing}: "
            f"pip install 'icore[{extra}]'", module=missing, extra=extra) from None
