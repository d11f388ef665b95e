"""PlanFence: dependency declaration, the gate, the protected action, the coordination policies.

The gate is planfence Alg. 1, the protected action with one replan App. A.3, the
coordination policies Sec. 5.1.

Every policy's head source and validator lives here: :func:`make_validator` builds the
validator a policy (named by :class:`Policy` or its string) gets from one frozen
:class:`GateContext` and a :class:`TeamContext`; :func:`strategy` tells a harness what
else the policy does (setup, propagation of updates, central service, replica views).

One verdict: :func:`judge_action` compares an executed action's frontier with the
owners' heads key by key and :func:`action_status` turns a recorded decision into its
status; replay, live runs, reports and the CLI all ask them. :class:`DecisionEntry` is
the typed gate decision logs and recordings carry (:meth:`GateDecision.entry`,
``DecisionEntry.from_dict``).

Pure layer: reaches owners only through :class:`icore.memory.OwnerAccess` /
:class:`icore.memory.AsyncOwnerAccess`; time comes from an injected clock.
"""

from icore.fence._access import (
    REPLICA_PREFIX,
    AllKeyHeads,
    AnnouncedHeads,
    CentralHeads,
    InstalledHeads,
    LoopOwners,
    QuorumHeads,
    ThreadedOwners,
    installed_heads,
    nonblocking,
    replica_service,
)
from icore.fence._binding import (
    ACTION_FIELD,
    action_record,
    args_digest,
    bind_action,
    canonical_args,
)
from icore.fence._decision import (
    INFRASTRUCTURE_REASONS,
    DecisionEntry,
    DecisionFormatError,
    GateDecision,
    Outcome,
    Reason,
)
from icore.fence._fence import (
    ActionResult,
    AsyncReplanner,
    DecisionLog,
    Fence,
    Replan,
    Replanner,
    ReplanRequest,
)
from icore.fence._gate import (
    GateContext,
    GateRun,
    HeadQueries,
    PointCounter,
    RecordFetches,
    apply_fail_open,
    arun_gate,
    avalidate,
    run_gate,
    validate,
)
from icore.fence._policies import (
    STRATEGIES,
    AllKeyValidator,
    GateValidator,
    LocalReplica,
    OwnerHeadFreshness,
    Policy,
    PolicyError,
    PolicyStrategy,
    PolicyValidator,
    Propagation,
    Reads,
    TeamContext,
    Validator,
    make_validator,
    strategy,
)
from icore.fence._tool import MAX_ARG_NESTING, ProtectedTool, RecordRef, protected
from icore.fence._verdict import ActionVerdict, KeyCheck, action_status, judge_action

__all__ = [
    "ACTION_FIELD",
    "INFRASTRUCTURE_REASONS",
    "MAX_ARG_NESTING",
    "REPLICA_PREFIX",
    "STRATEGIES",
    "ActionResult",
    "ActionVerdict",
    "AllKeyHeads",
    "AllKeyValidator",
    "AnnouncedHeads",
    "AsyncReplanner",
    "CentralHeads",
    "DecisionEntry",
    "DecisionFormatError",
    "DecisionLog",
    "Fence",
    "GateContext",
    "GateDecision",
    "GateRun",
    "GateValidator",
    "HeadQueries",
    "InstalledHeads",
    "KeyCheck",
    "LocalReplica",
    "LoopOwners",
    "Outcome",
    "OwnerHeadFreshness",
    "PointCounter",
    "Policy",
    "PolicyError",
    "PolicyStrategy",
    "PolicyValidator",
    "Propagation",
    "ProtectedTool",
    "QuorumHeads",
    "Reads",
    "Reason",
    "RecordFetches",
    "RecordRef",
    "Replan",
    "ReplanRequest",
    "Replanner",
    "TeamContext",
    "ThreadedOwners",
    "Validator",
    "action_record",
    "action_status",
    "apply_fail_open",
    "args_digest",
    "arun_gate",
    "avalidate",
    "bind_action",
    "canonical_args",
    "installed_heads",
    "judge_action",
    "make_validator",
    "nonblocking",
    "protected",
    "replica_service",
    "run_gate",
    "strategy",
    "validate",
]
