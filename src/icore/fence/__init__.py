"""PlanFence: dependency declaration, the gate (planfence Alg. 1), the protected action
with one replan (App. A.3), and the coordination policies (Sec. 5.1).

Pure layer: reaches owners only through :class:`icore.memory.OwnerAccess` /
:class:`icore.memory.AsyncOwnerAccess`; time comes from an injected clock.
"""

from icore.fence._decision import INFRASTRUCTURE_REASONS, GateDecision, Outcome, Reason
from icore.fence._fence import (
    ActionResult,
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
from icore.fence._tool import ProtectedTool, RecordRef, protected

__all__ = [
    "INFRASTRUCTURE_REASONS",
    "ActionResult",
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
    "apply_fail_open",
    "avalidate",
    "protected",
    "validate",
]
