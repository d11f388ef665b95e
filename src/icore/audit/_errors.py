"""Errors of iCORE-Audit (attached to the ``IcoreError`` tree, style habit 4).

::

    AuditError          icore.audit: misuse of the loop (bad config, a host that returns
                        something other than a proposal, a recovery that cannot be
                        committed after it was accepted on the candidate copy)

Rejections and failed recoveries are *not* errors: they are log entries (design.md 4.4).
"""

from __future__ import annotations

from icore.errors import ErrorCode, IcoreError


class AuditError(IcoreError):
    """Root of the iCORE-Audit errors (design.md 4.4)."""

    code = ErrorCode.AUDIT
