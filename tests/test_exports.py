"""Public export lists are pinned so API changes are deliberate (style habit 2)."""

from __future__ import annotations

import importlib

import pytest

PINNED = {
    "icore.agents": [
        "MODES", "SYSTEM_PROMPT", "TALLY_KEYS", "Decider", "DecisionOutcome", "DecisionRequest",
        "LLMConfig", "LLMDecider", "LLMSettings", "LLMUnavailable", "Negotiation",
        "ScriptedDecider", "ToolSpec", "check_call", "decider_from_config", "decision_tally",
        "discover_slots", "dumps_transcript", "enum_prop", "fit_timeouts", "negotiate",
        "negotiated_backend", "object_schema",
    ],
    "icore.live": [
        "FAMILIES", "FAMILY_SPECS", "ROLES", "SEEDS_PER_FAMILY", "TABLE_HEADER",
        "AgentCrashed", "AuditListener",
        "LiveAgentSpec", "LiveAudit", "LiveManifestError", "LiveRunError", "LiveRunResult",
        "LiveTeam", "MatchedResult", "MatchedRow", "Reporter", "RunManifest", "RunObserver",
        "StepTimeout", "TaskResult", "TaskSpec", "arun_live", "default_manifest",
        "live_declaration", "load_manifest", "make_task", "manifest_from_dict",
        "matched_manifest", "run_live", "run_matched", "run_policies",
    ],
    "icore.records": [
        "MAX_CONTENT_BYTES", "MAX_LINEAGE_RECORDS", "MAX_PARENTS", "MAX_RECORD_BYTES",
        "SCHEMA_VERSION", "Frontier", "JSONValue", "Lookup", "Record", "RecordId",
        "TraversalMode", "ancestors", "canonical_json", "content_address", "decode_record",
        "derive", "encode_record", "frontier", "is_chain_link", "is_record_id",
        "lineage_inputs", "record_from_wire", "record_to_wire",
    ],
    "icore.memory": [
        "DEFAULT_TIMEOUT_S", "FROM_PARENTS", "AsyncOwnerAccess", "CommitOp", "CommitResult",
        "ExpectedHead", "HeadEntry", "HeadReply", "LocalOwners", "MemoryStore",
        "OwnerAccess", "OwnerUnavailable", "OwnershipMap", "SQLiteStore", "Store",
        "check_commit_rules",
    ],
    "icore.fence": [
        "ACTION_FIELD", "INFRASTRUCTURE_REASONS", "MAX_ARG_NESTING", "REPLICA_PREFIX",
        "STRATEGIES", "ActionResult", "AllKeyHeads", "AllKeyValidator", "AnnouncedHeads",
        "AsyncReplanner", "CentralHeads", "DecisionLog", "Fence", "GateContext",
        "GateDecision", "GateRun", "GateValidator", "HeadQueries", "InstalledHeads",
        "LocalReplica", "LoopOwners", "Outcome", "OwnerHeadFreshness", "PointCounter",
        "Policy", "PolicyError", "PolicyStrategy", "PolicyValidator", "Propagation",
        "ProtectedTool", "QuorumHeads", "Reads", "Reason", "RecordFetches", "RecordRef",
        "Replan", "ReplanRequest", "Replanner", "TeamContext", "ThreadedOwners", "Validator",
        "action_record", "apply_fail_open", "args_digest", "arun_gate", "avalidate",
        "bind_action", "canonical_args", "installed_heads", "make_validator", "nonblocking",
        "protected", "replica_service", "run_gate", "strategy", "validate",
    ],
    "icore.net.nats": [
        "ADMIN_IDENTITY", "BARRIER_TOKEN", "DEFAULT_PREFIX", "MAX_COMMIT_RETRIES",
        "SERVER_IDENTITY", "CrossLoopNatsAccess", "NatsCluster", "NatsMemory", "NatsNode",
        "NatsOwnerAccess", "NatsServerError", "NatsStats", "NatsStore",
        "SyncNatsOwnerAccess", "TeamEngine", "bucket_names", "check_nats_agent",
        "connect_nats", "create_buckets", "decode_key", "encode_key", "nats_certs",
        "nats_server_binary", "server_config",
    ],
    "icore.integrations": [
        "AnyReplanner", "ArgNormalizer", "FenceGuard", "Gated", "OnBlock", "Replicator",
        "RunRecorder", "Scope", "active_recorder", "check_tool_function", "normalize_args",
        "signature_model",
    ],
    "icore.workspace": [
        "ACTION_PREFIX", "APPROVAL_FIELD", "ARGS_NOT_JSON", "FACT_TYPE", "NOT_READ",
        "REJECTED", "Agent", "Answer", "ApprovalBook", "ApprovalRequest", "Approver",
        "AsyncUserReplanner", "Call", "RunningCall", "Scope", "Stale", "UserReplanner",
        "Verdict", "Workspace", "WorkspaceError", "read_answer", "running_call",
    ],
    "icore.integrations.cost": ["FRAMEWORKS", "FrameworkCase", "World", "seam_cases"],
    "icore.integrations.langgraph": [
        "RecordCheckpointSaver", "RecordStore", "RecordingHandler", "RootsFrom",
        "StateUpdate", "fenced_tool", "is_fenced", "recorded_node",
    ],
    "icore.integrations.openai_agents": [
        "AgentsActionBlocked", "ContextRoots", "RecordingProcessor", "fenced_function_tool",
        "recording",
    ],
    "icore.integrations.ag2": ["ChatRecorder", "ContextRoots", "fenced_tool",
                               "record_agents"],
    "icore.mcp": [
        "DEFAULT_CALL_TIMEOUT_S", "DEFAULT_GATE_TIMEOUT_S", "FACT_SCHEME",
        "BenchRow", "FactBook", "FactsSpec", "Gateway", "GatewayError",
        "GatewayManifest", "GatewayManifestError", "GatewayTrace", "Route", "SessionView",
        "StoreSpec", "ToolSpec", "Upstream", "UpstreamError", "UpstreamSpec", "Verdict",
        "describe", "expand_deps", "load_manifest", "manifest_from_dict", "run_bench", "serve_http",
        "serve_stdio",
    ],
}


@pytest.mark.parametrize("module", sorted(PINNED))
def test_exports_pinned(module: str) -> None:
    """``__all__`` equals the pinned list and every name resolves."""
    mod = importlib.import_module(module)
    assert sorted(mod.__all__) == sorted(PINNED[module])
    for name in mod.__all__:
        assert hasattr(mod, name), name


def test_fence_exports_resolve() -> None:
    """Every exported fence name resolves and the core ones are present."""
    mod = importlib.import_module("icore.fence")
    for name in mod.__all__:
        assert hasattr(mod, name), name
    assert {"Fence", "validate", "avalidate", "protected", "GateRun", "Policy"} <= set(
        mod.__all__)
