"""The workspace's typed errors (attached to the icore tree under IntegrationError)."""

from __future__ import annotations

from icore.errors import ErrorCode, IntegrationError


class WorkspaceError(IntegrationError, ValueError):
    """A workspace was set up or used wrongly: an undeclared fact, a remote write, ...

    Fields name the key, owner or agent and, where there is one, the fix.
    """

    code = ErrorCode.WORKSPACE
