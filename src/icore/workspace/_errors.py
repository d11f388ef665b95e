"""The workspace's typed errors (attached to the icore tree under IntegrationError).

::

    IntegrationError                (icore.errors)
    └── WorkspaceError (ValueError) icore.workspace: a workspace set up or used wrongly
        ├── FactNotWritten (LookupError)  a fact no owner has written yet was read
        └── ReplanFailed                  a user replanner failed; the call did not run
"""

from __future__ import annotations

from typing import Any

from icore.errors import ErrorCode, IntegrationError


class WorkspaceError(IntegrationError, ValueError):
    """A workspace was set up or used wrongly: an undeclared fact, a remote write, ...

    Fields name the key, owner or agent and, where there is one, the fix.
    """

    code = ErrorCode.WORKSPACE


class FactNotWritten(WorkspaceError, LookupError):
    """A read of a declared fact that has no version yet (its owner never wrote it).

    Raised by :meth:`Workspace.value`, :meth:`Agent.read` and :meth:`Workspace.update`
    unless ``default=`` is given; :meth:`Workspace.head` returns None instead. Fields:
    ``key``, and ``fix`` (``did you mean ...?`` naming a written key when one is close,
    else how to write it).
    """


class ReplanFailed(WorkspaceError):
    """A user replanner (``replan=``) failed.

    It raised, or returned something other than the tool's arguments (or
    :data:`~icore.workspace.DECLINE`). An application error, never a message to the
    model: the call did not run (it is logged and recorded as blocked), and this error
    reaches the application, chained to the replanner's own exception (``__cause__``)
    when it raised. Fields: ``action``,
    ``error`` (what went wrong), ``fix``.

    Attributes:
        call: the blocked :class:`~icore.workspace.Call` (None when not known).
    """

    def __init__(self, message: str, **fields: Any) -> None:
        super().__init__(message, **fields)
        self.call: Any = None
