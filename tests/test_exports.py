"""Public export lists are pinned so API changes are deliberate (style habit 2)."""

from __future__ import annotations

import importlib

import pytest

PINNED = {
    "icore.records": [
        "MAX_CONTENT_BYTES", "MAX_LINEAGE_RECORDS", "MAX_PARENTS", "MAX_RECORD_BYTES",
        "SCHEMA_VERSION", "Frontier", "JSONValue", "Lookup", "Record", "RecordId",
        "TraversalMode", "ancestors", "canonical_json", "content_address", "decode_record",
        "derive", "encode_record", "frontier", "is_record_id", "record_from_wire",
        "record_to_wire",
    ],
    "icore.memory": [
        "DEFAULT_TIMEOUT_S", "FROM_PARENTS", "AsyncOwnerAccess", "CommitOp", "CommitResult",
        "ExpectedHead", "HeadEntry", "HeadReply", "LocalOwners", "MemoryStore",
        "OwnerAccess", "OwnerUnavailable", "OwnershipMap", "SQLiteStore", "Store",
        "check_commit_rules",
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
