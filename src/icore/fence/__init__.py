"""PlanFence: dependency declaration, the gate (planfence Alg. 1), the protected action
with one replan (App. A.3), and the coordination policies (Sec. 5.1).

Pure layer: reaches owners only through :class:`icore.memory.OwnerAccess` /
:class:`icore.memory.AsyncOwnerAccess`; time comes from an injected clock.
"""

from icore.fence._binding import (
    ACTION_FIELD,
    action_record,
    args_digest,
    bind_action,
    canonical_args,
)
from icore.fence._decision import INFRASTRUCTURE_REASONS, GateDecision, Outcome, Reason
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
    GateRun,
    HeadQueries,
    PointCounter,
    RecordFetches,
    apply_fail_open,
    avalidate,
    validate,
)
from icore.fence._policies import (
    GateValidator,
    InstalledHeads,
    LocalReplica,
    OwnerHeadFreshness,
    Policy,
    Validator,
)
from icore.fence._tool import MAX_ARG_NESTING, ProtectedTool, RecordRef, protected

__all__ = [
    "ACTION_FIELD",
    "INFRASTRUCTURE_REASONS",
    "MAX_ARG_NESTING",
    "ActionResult",
    "AsyncReplanner",
    "DecisionLog",
    "Fence",
    "GateDecision",
    "GateRun",
    "GateValidator",
    "HeadQueries",
    "InstalledHeads",
    "LocalReplica",
    "Outcome",
    "OwnerHeadFreshness",
    "PointCounter",
    "Policy",
    "ProtectedTool",
    "Reason",
    "RecordFetches",
    "RecordRef",
    "Replan",
    "ReplanRequest",
    "Replanner",
    "Validator",
    "action_record",
    "apply_fail_open",
    "args_digest",
    "avalidate",
    "bind_action",
    "canonical_args",
    "protected",
    "validate",
]
