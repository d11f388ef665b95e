"""The public API list is pinned and the layering rule holds (style habits 2, 3)."""

from __future__ import annotations

import ast
from pathlib import Path

import icore.state

STATE_SRC = Path(icore.state.__file__).parent
ALLOWED = {"icore.errors", "icore._clock", "icore._files", "icore._frozen", "icore._yaml",
           "icore.records", "icore.memory", "icore.state"}
# icore._yaml: the shared YAML loader (architecture.md); icore._frozen: the positional
# builders of frozen dataclasses (shared by every layer, tests/test_layering.py)

EXPECTED = {
    "StateView",
    "ASSIGNER_ROLE",
    "BOUND_CONDITIONS",
    "BUILTIN_VALIDATORS",
    "CLOSED_STATUSES",
    "TASK_ROLE",
    "TRANSPORTED_TO",
    "AgentDecl",
    "Assertion",
    "AssertionImported",
    "AssertionKind",
    "Certificate",
    "CertificateImported",
    "CertificateRequest",
    "Committed",
    "DeclarationPackage",
    "DeclarationPackageError",
    "Decision",
    "DiagnosisLike",
    "Effect",
    "EffectTemplate",
    "EntryKind",
    "Event",
    "EventAdded",
    "EventSpec",
    "FlagKind",
    "FlagRaised",
    "FlagResolved",
    "HardFlag",
    "HeadView",
    "InterfaceError",
    "Interfaces",
    "Justification",
    "Log",
    "LogEntry",
    "LogError",
    "MatchedSet",
    "MemoryLog",
    "Metrics",
    "Note",
    "Obligation",
    "ObservableType",
    "OperationDecl",
    "Parameters",
    "Preconditions",
    "Proposal",
    "ProposalRecorded",
    "RejectionReason",
    "ReasonCode",
    "CitedRecord",
    "Rejected",
    "Revoked",
    "SQLiteLog",
    "State",
    "StateError",
    "StateInputError",
    "Status",
    "StoreHeadView",
    "LineageHeadView",
    "RecordSource",
    "UNKNOWN_KEY",
    "owners_head_view",
    "Transition",
    "ValidatorError",
    "ValidatorInput",
    "ValidatorSpec",
    "Verdict",
    "audit",
    "check_legality",
    "declaration_from_dict",
    "decode_entry",
    "encode_entry",
    "equivalent",
    "export_json",
    "fixed",
    "full_metrics",
    "load_declaration",
    "normalize",
    "rebuild",
    "run_validator",
    "store_head_view",
    "transport_problem",
}


def test_all_is_pinned():
    assert set(icore.state.__all__) == EXPECTED
    assert icore.state.__all__ == sorted(icore.state.__all__, key=lambda s: (not s.isupper(), s))
    for name in icore.state.__all__:
        assert hasattr(icore.state, name), name


def test_import_rule():
    for path in STATE_SRC.glob("*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            mods: list[str] = []
            if isinstance(node, ast.Import):
                mods = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                mods = [node.module]
            for m in mods:
                if m.startswith("icore"):
                    top = ".".join(m.split(".")[:2])
                    assert top in ALLOWED, f"{path.name} imports {m}"


def test_only_the_log_does_io():
    for path in STATE_SRC.glob("*.py"):
        if path.name == "_log.py":
            continue
        text = path.read_text()
        assert "import sqlite3" not in text, path.name
        assert "time.time" not in text and "datetime.now" not in text, path.name
        assert "import random" not in text, path.name


def test_errors_hang_off_the_tree():
    from icore.errors import IcoreError

    for name in (
        "StateError",
        "DeclarationPackageError",
        "StateInputError",
        "ValidatorError",
        "LogError",
        "InterfaceError",
    ):
        assert issubclass(getattr(icore.state, name), IcoreError)
    assert issubclass(icore.state.DeclarationPackageError, ValueError)
    assert issubclass(icore.state.StateInputError, ValueError)
