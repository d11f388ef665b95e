"""The team's shared facts and the agents that act on them (issue 28; planfence Sec. 3-4).

The high-level API: the model's own tool call is the plan.

* :class:`Workspace`: shared facts (semantic keys) declared once with their owners, over
  stores in this process (memory or SQLite, one per owner) or owners elsewhere (the TCP
  owner client, NATS owner access of :mod:`icore.net`); compare-and-set writes with a
  retry helper (:meth:`Workspace.update`).
* :class:`Agent` (``ws.agent("shipper")``): records each read of a fact as the version it
  saw; :meth:`Agent.execute` turns a protected call into its action record (derived from
  those versions, bound to the arguments) and runs it through the PlanFence gate (Alg. 1,
  App. A.3) with the one replan; every call is its own root.
* :class:`ApprovalRequest` / :class:`ApprovalBook`: a human approval bound to the call's
  normalised arguments and the versions it derives from.
* :func:`reassign_owner`: move an entry of a :meth:`Workspace.sqlite` folder's
  ownership record (``campaign/*``) to another owner, with its facts.

Layer: above :mod:`icore.net`, below everything that builds on it (integrations, the MCP
gateway). Errors (``from icore.workspace import ...``): :class:`WorkspaceError` (an
:class:`~icore.errors.IntegrationError`), its subclasses :class:`FactNotWritten` (a read
of a fact never written, without ``default=``) and :class:`ReplanFailed` (a broken
user replanner; the call did not run).
The low-level API (records, ``derive``, ``bind_action``, ``Fence``) is unchanged.
"""

from icore.workspace._agent import ACTION_PREFIX, Agent
from icore.workspace._approval import (
    APPROVAL_FIELD,
    Answer,
    ApprovalBook,
    ApprovalRequest,
    Verdict,
    read_answer,
)
from icore.workspace._call import (
    APPROVAL_CHANGED,
    ARGS_NOT_JSON,
    ARGS_TOO_LARGE,
    DECLINE,
    NOT_READ,
    REJECTED,
    Approver,
    AsyncUserReplanner,
    Call,
    CallRefused,
    RunningCall,
    Scope,
    Stale,
    UserReplanner,
    running_call,
)
from icore.workspace._durable_calls import ALREADY_RAN, CALL_RUNNING, EARLIER_UNKNOWN
from icore.workspace._errors import FactNotWritten, ReplanFailed, WorkspaceError
from icore.workspace._keys import (
    GLOB_CHARS,
    MISSING,
    arg_fault,
    bad_args_hint,
    key_args,
    unwritten_hint,
)
from icore.workspace._reassign import Reassignment, ownership_record, reassign_owner
from icore.workspace._restore import restore_reads
from icore.workspace._unknown import NoEffect, check_first, unknown_outcome_text
from icore.workspace._workspace import FACT_TYPE, Workspace

__all__ = [
    "ACTION_PREFIX",
    "ALREADY_RAN",
    "APPROVAL_CHANGED",
    "APPROVAL_FIELD",
    "ARGS_NOT_JSON",
    "ARGS_TOO_LARGE",
    "CALL_RUNNING",
    "DECLINE",
    "EARLIER_UNKNOWN",
    "FACT_TYPE",
    "GLOB_CHARS",
    "MISSING",
    "NOT_READ",
    "REJECTED",
    "Agent",
    "Answer",
    "ApprovalBook",
    "ApprovalRequest",
    "Approver",
    "AsyncUserReplanner",
    "Call",
    "CallRefused",
    "FactNotWritten",
    "NoEffect",
    "Reassignment",
    "ReplanFailed",
    "RunningCall",
    "Scope",
    "Stale",
    "UserReplanner",
    "Verdict",
    "Workspace",
    "WorkspaceError",
    "arg_fault",
    "bad_args_hint",
    "check_first",
    "key_args",
    "ownership_record",
    "read_answer",
    "reassign_owner",
    "restore_reads",
    "running_call",
    "unknown_outcome_text",
    "unwritten_hint",
]
