"""Marks that trace writers put in a line's text and the audit reads back.

Pure constants, no icore import: every layer may use this module (the MCP gateway
writes them without loading the audit).
"""

from __future__ import annotations

MAY_HAVE_RUN_MARK = "MAY HAVE RUN: "
"""Prefix of a protected call's error text when the call may have run (its outcome is
unknown: the audit counts it so, not as a call known to have failed)."""

__all__ = ["MAY_HAVE_RUN_MARK"]
