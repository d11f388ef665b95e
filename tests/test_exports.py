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
        "AgentCrashed", "AuditListener", "LedgerListener", "LiveAgentSpec", "LiveAudit",
        "LiveLedger", "LiveManifestError", "LiveRunError", "LiveRunResult", "LiveTeam",
        "MatchedResult", "MatchedRow", "Reporter", "RunManifest", "RunObserver",
        "StepTimeout", "TaskResult", "TaskSpec", "arun_live", "default_manifest",
        "live_declaration", "load_manifest", "make_task", "manifest_from_dict",
        "matched_manifest", "run_live", "run_matched", "run_policies",
    ],
    "icore.records": [
        "MAX_CONTENT_BYTES", "MAX_KEY_LEN", "MAX_LINEAGE_RECORDS", "MAX_PARENTS",
        "MAX_RECORD_BYTES",
        "SCHEMA_VERSION", "Frontier", "JSONValue", "Lookup", "Record", "RecordId",
        "TraversalMode", "ancestors", "canonical_json", "content_address", "decode_record",
        "derive", "encode_record", "frontier", "is_chain_link", "is_record_id",
        "lineage_inputs", "plain_record_from_wire", "record_from_wire", "record_to_wire",
    ],
    "icore.memory": [
        "DEFAULT_TIMEOUT_S", "FROM_PARENTS", "AsyncOwnerAccess", "CommitOp", "CommitResult",
        "ExpectedHead", "HeadEntry", "HeadReply", "LocalOwners", "MemoryStore",
        "OwnerAccess", "OwnerUnavailable", "OwnershipMap", "SQLiteStore", "Store",
        "check_commit_rules",
    ],
    "icore.fence": [
        "ACTION_FIELD", "INFRASTRUCTURE_REASONS", "INVALID_ARGUMENTS", "NOT_FINITE",
        "non_finite_paths",
        "REASON_ALIASES", "REFUSAL_REASONS", "canonical_reason", "MAX_ARG_NESTING",
        "REPLICA_PREFIX",
        "STRATEGIES", "ActionResult", "ActionVerdict", "AllKeyCheck", "AllKeyHeads",
        "AllKeyValidator", "AnnouncedHeads", "AsyncReplanner", "CentralHeads",
        "DecisionEntry", "DecisionFormatError", "DecisionLog", "Fence", "GateCheck",
        "GateContext", "GateDecision", "GateRun", "GateValidator", "HeadQueries",
        "InstalledHeads", "KeyCheck", "LocalReplica", "LoopOwners", "Outcome",
        "OwnerHeadFreshness", "PlanFenceCheck", "PointCounter", "Policy", "PolicyCheck",
        "PolicyError", "PolicyStrategy", "PolicyValidator", "Propagation", "ProtectedTool",
        "QuorumHeads", "Reads", "Reason", "RecordFetches", "RecordRef", "Replan",
        "ReplanRequest", "Replanner", "TeamContext", "ThreadedOwners", "Validator",
        "action_ran", "action_record", "action_status", "apply_fail_open", "args_digest",
        "arun_gate", "authorizing", "avalidate", "bind_action", "canonical_args", "installed_heads",
        "judge_action", "make_check", "make_validator", "nonblocking", "protected",
        "replica_service", "run_gate", "strategy", "validate",
    ],
    "icore.net.nats": [
        "ADMIN_IDENTITY", "BARRIER_TOKEN", "DEFAULT_PREFIX", "MAX_COMMIT_RETRIES",
        "SERVER_IDENTITY", "CrossLoopNatsAccess", "NatsCluster", "NatsMemory", "NatsNode",
        "NatsOwnerAccess", "NatsServerError", "NatsStats", "NatsStore",
        "SyncNatsOwnerAccess", "TeamEngine", "bucket_names", "check_nats_agent",
        "connect_nats", "create_buckets", "decode_key", "encode_key", "nats_certs",
        "nats_server_binary", "server_config",
    ],
    "icore.memory.nats": [
        "ADMIN_IDENTITY", "BARRIER_TOKEN", "DEFAULT_PREFIX", "MAX_COMMIT_RETRIES",
        "CrossLoopNatsAccess", "NatsMemory", "NatsOwnerAccess", "NatsStats", "NatsStore",
        "SyncNatsOwnerAccess", "bucket_names", "check_nats_agent", "connect_nats",
        "create_buckets", "decode_key", "encode_key",
    ],
    "icore.memory.conformance": [
        "HOT_OWNER", "HOT_OWNERSHIP", "OWNERSHIP", "ConcurrentWriters", "StoreConformance",
        "StoreWriter", "Writer", "check_chains",
    ],
    "icore.attribution": [
        "BASELINES", "FEATURES", "LLM_MODES", "PUBLISHED", "PUBLISHED_BEST", "RANDOM",
        "REGULARIZATION_C", "SCORER", "SUBSET_NAMES", "TARGETS", "TOLERANCES",
        "Attribution", "AttributionEval", "AttributionScore", "Candidate", "ChainLink",
        "Feature", "LLMAttributor", "MethodResult", "ModelSet", "Prediction",
        "RankedCandidate", "RunPrediction", "ScoreRow", "ScorerModel", "agent_counts",
        "attribute", "best_baseline", "candidates", "cross_validate", "cv_score",
        "feature_names", "first_error_marker", "first_output_after_replan",
        "first_unsupported", "fit_model_set", "fit_scorer", "group_key",
        "last_agent_before_answer", "load_shipped_model", "majority_agent", "markdown",
        "random_expectation", "rank_candidates", "score", "shipped_models", "speakers",
        "subset_label", "weights_markdown", "with_llm_rows", "write_outputs",
    ],
    "icore.cli.inputs": [
        "FAIL_EXIT", "OutputFile", "adopt_otlp_file", "check_llm_options", "check_otlp_endpoint",
        "fail_conditions", "int_list", "nonempty_path", "otlp_file_target",
        "otlp_undelivered", "output_file", "positive_number", "positive_seconds",
        "positive_seconds_or_none", "refuse_foreign_otlp_file", "refuse_input_as_output",
        "refuse_inputs_inside",
        "refuse_non_folder", "refuse_special_file", "refuse_trace_outputs_in", "same_file",
        "shown_path", "too_long",
        "unwritable",
    ],
    "icore.integrations": [
        "GATEWAY_POLICY", "AnyReplanner", "ArgNormalizer", "FenceGuard", "Gated", "NoEffect",
        "OnBlock", "Refusal", "Replicator", "RunRecorder", "Scope", "Writes", "active_recorder",
        "blocked_line", "check_tool_function", "normalize_args", "read_refusal", "refusal_head",
        "signature_model",
    ],
    "icore.workspace": [
        "ACTION_PREFIX", "APPROVAL_CHANGED", "APPROVAL_FIELD", "ARGS_NOT_JSON", "ARGS_TOO_LARGE",
        "DECLINE",
        "FACT_TYPE", "GLOB_CHARS", "MISSING", "NOT_READ", "REJECTED", "Agent", "Answer",
        "ApprovalBook", "ApprovalRequest", "Approver", "AsyncUserReplanner", "Call", "CallRefused",
        "FactNotWritten", "ReplanFailed", "RunningCall", "Scope", "Stale", "UserReplanner",
        "Verdict", "Workspace", "WorkspaceError", "arg_fault", "bad_args_hint", "key_args",
        "read_answer",
        "running_call", "check_first", "unknown_outcome_text", "unwritten_hint", "Reassignment",
        "ownership_record", "reassign_owner", "restore_reads", "ALREADY_RAN", "CALL_RUNNING",
        "EARLIER_UNKNOWN", "NoEffect",
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
        "serve_stdio", "ClientSpec", "HttpSpec", "StaticTokens", "token_verifier",
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
