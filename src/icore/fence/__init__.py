"""PlanFence: dependency declaration, the gate, the protected action, the coordination policies.

The gate is planfence Alg. 1, the protected action with one replan App. A.3, the
coordination policies Sec. 5.1.

Every policy's head source and gate check lives here: :func:`make_check` builds the
:class:`GateCheck` a policy (named by :class:`Policy` or its string) gets from one frozen
:class:`GateContext` and a :class:`TeamContext`; :func:`strategy` tells a harness what
else the policy does (setup, propagation of updates, central service, replica views).

One verdict: :func:`judge_action` compares an executed action's frontier with the
owners' heads key by key and :func:`action_status` turns a recorded decision into its
status; replay, live runs, reports and the CLI all ask them. :class:`DecisionEntry` is
the typed gate decision logs and recordings carry (:meth:`GateDecision.entry`,
``DecisionEntry.from_dict``). :func:`authorizing` gives the decisions of the protected
action whose tool body is running (a recorder puts them on disk before the effect).

Names before issue 26 stay as deprecated aliases: ``Validator`` (:class:`GateCheck`),
``GateValidator`` (:class:`PlanFenceCheck`), ``AllKeyValidator`` (:class:`AllKeyCheck`),
``PolicyValidator`` (:class:`PolicyCheck`), ``make_validator`` (:func:`make_check`);
"validator" now means only iCORE's certificate validator V.

Pure layer: reaches owners only through :class:`icore.memory.OwnerAccess` /
:class:`icore.memory.AsyncOwnerAccess`; time comes from an injected clock.
"""

from icore.fence._authorizing import authorizing
from icore.fence._binding import (
    ACTION_FIELD,
    action_record,
    args_digest,
    bind_action,
    canonical_args,
    non_finite_paths,
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
from icore.fence._owner_queries import (
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
from icore.fence._policies import (
    STRATEGIES,
    AllKeyCheck,
    GateCheck,
    LocalReplica,
    OwnerHeadFreshness,
    PlanFenceCheck,
    Policy,
    PolicyCheck,
    PolicyError,
    PolicyStrategy,
    Propagation,
    Reads,
    TeamContext,
    make_check,
    strategy,
)
from icore.fence._reason_table import (
    INVALID_ARGUMENTS,
    NOT_FINITE,
    REASON_ALIASES,
    REFUSAL_REASONS,
    canonical_reason,
)
from icore.fence._tool import MAX_ARG_NESTING, ProtectedTool, RecordRef, protected
from icore.fence._verdict import (
    ActionVerdict,
    KeyCheck,
    action_ran,
    action_status,
    judge_action,
)

# names before issue 26 ("validator" now means only iCORE's certificate validator V)
Validator = GateCheck
"""Deprecated alias of :class:`GateCheck`."""
GateValidator = PlanFenceCheck
"""Deprecated alias of :class:`PlanFenceCheck`."""
AllKeyValidator = AllKeyCheck
"""Deprecated alias of :class:`AllKeyCheck`."""
PolicyValidator = PolicyCheck
"""Deprecated alias of :class:`PolicyCheck`."""
make_validator = make_check
"""Deprecated alias of :func:`make_check`."""

__all__ = [
    "ACTION_FIELD",
    "INFRASTRUCTURE_REASONS",
    "INVALID_ARGUMENTS",
    "MAX_ARG_NESTING",
    "NOT_FINITE",
    "REASON_ALIASES",
    "REFUSAL_REASONS",
    "REPLICA_PREFIX",
    "STRATEGIES",
    "ActionResult",
    "ActionVerdict",
    "AllKeyCheck",
    "AllKeyHeads",
    "AllKeyValidator",
    "AnnouncedHeads",
    "AsyncReplanner",
    "CentralHeads",
    "DecisionEntry",
    "DecisionFormatError",
    "DecisionLog",
    "Fence",
    "GateCheck",
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
    "PlanFenceCheck",
    "PointCounter",
    "Policy",
    "PolicyCheck",
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
    "action_ran",
    "action_record",
    "action_status",
    "apply_fail_open",
    "args_digest",
    "arun_gate",
    "authorizing",
    "avalidate",
    "bind_action",
    "canonical_args",
    "canonical_reason",
    "installed_heads",
    "judge_action",
    "make_check",
    "make_validator",
    "non_finite_paths",
    "nonblocking",
    "protected",
    "replica_service",
    "run_gate",
    "strategy",
    "validate",
]
