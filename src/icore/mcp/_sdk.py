"""The ``mcp`` SDK the gateway needs: 2.x, checked before any of it is imported.

An environment with ``mcp`` 1.x (``langchain-mcp-adapters`` pins ``mcp<2``) would fail
deep in the SDK (``Server(on_list_tools=...)``); this check fails first, in one line,
naming both versions and the fix (QA r6-lgmcp D3).
"""

from __future__ import annotations

import sys
from types import ModuleType

from icore._extras import pinned_minimum, require_version

MCP_MINIMUM = pinned_minimum("mcp", "mcp", "2.3")
"""The oldest ``mcp`` release the gateway supports (the ``icore[mcp]`` pin)."""


def require_mcp() -> ModuleType:
    """Import ``mcp`` at :data:`MCP_MINIMUM` or newer.

    Returns:
        The ``mcp`` module.

    Raises:
        MissingExtra: ``mcp`` is missing (the install line) or older (the fix: run the
            gateway from an environment of its own, since upgrading ``mcp`` here would
            break what pinned it, e.g. ``langchain-mcp-adapters``).
    """
    fix = (f"this environment ({sys.prefix}) keeps an older mcp (langchain-mcp-adapters "
           "pins mcp<2), so run the gateway from its own venv: python -m venv gw-venv && "
           "gw-venv/bin/pip install 'icore[mcp]', then launch /abs/path/gw-venv/bin/icore "
           "mcp MANIFEST (docs/mcp.md, two environments)")
    return require_version("mcp", "mcp", MCP_MINIMUM, feature="icore mcp", fix=fix)
