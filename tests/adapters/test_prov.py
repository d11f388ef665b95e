"""PROV-JSON export: reads back with ``prov`` and validates."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from icore.adapters import (
    ICORE_NS,
    ExportError,
    audit_trace,
    parse_magentic_one,
    read_prov,
    to_prov,
    validate_prov,
    write_prov,
)

prov_model = pytest.importorskip("prov.model")


def test_round_trip_and_validate(magentic: dict[str, Any], tmp_path: Path) -> None:
    """The written document reads back equal and passes the validator."""
    r = audit_trace(parse_magentic_one(magentic))
    p = write_prov(r.state, tmp_path / "run.prov.json", run_id="m1")
    doc = read_prov(p)
    assert validate_prov(doc) == []
    assert doc == to_prov(r.state, run_id="m1")
    data = json.loads(p.read_text(encoding="utf-8"))
    assert data["prefix"]["icore"] == ICORE_NS
    assert {"entity", "activity", "agent", "used", "wasGeneratedBy",
            "wasAssociatedWith", "wasAttributedTo"} <= set(data)


def test_mapping(magentic: dict[str, Any]) -> None:
    """Agents are agents, artifacts entities, actions and operations activities; Q in icore:."""
    r = audit_trace(parse_magentic_one(magentic))
    doc = to_prov(r.state, run_id="m1")
    data = json.loads(doc.serialize(format="json"))
    ents, acts, agents = data["entity"], data["activity"], data["agent"]
    assert "run:agent/WebSurfer" in agents
    out = ents["run:event/m4"]
    assert out["prov:type"]["$"] == "icore:Artifact"
    assert acts["run:event/m3"]["prov:type"]["$"] == "icore:Action"
    ob = ents["run:obligation/o6"]
    assert ob["icore:status"] == "submitted" and ob["icore:sound"] is False
    kinds = {v["prov:type"]["$"] for v in ents.values()}
    assert {"icore:Obligation", "icore:Assertion", "icore:Certificate", "icore:HardFlag"} <= kinds
    ops = [v for v in acts.values() if v["prov:type"]["$"] == "icore:Operation"]
    assert {o["icore:operation"] for o in ops} >= {"assign", "submit", "ledger_update"}


def test_validator_catches_problems() -> None:
    """A relation between the wrong kinds of records, or no icore namespace, is reported."""
    doc = prov_model.ProvDocument()
    doc.add_namespace("run", "urn:x:")
    doc.entity("run:a")
    doc.entity("run:b")
    doc.used("run:a", "run:b")
    problems = validate_prov(doc)
    assert any("icore namespace" in p for p in problems)
    assert any("run:a is a entity" in p for p in problems)


def test_read_prov_errors(tmp_path: Path) -> None:
    """A non-PROV file is an ExportError naming the file."""
    p = tmp_path / "bad.prov.json"
    p.write_text("{not json", encoding="utf-8")
    with pytest.raises(ExportError) as info:
        read_prov(p)
    assert info.value.file == str(p)


@pytest.mark.timeout(30)
def test_read_prov_refuses_a_fifo(tmp_path: Path) -> None:
    """A named pipe would block the read forever: a typed error naming it and its kind."""
    fifo = tmp_path / "run.prov.json"
    os.mkfifo(fifo)
    with pytest.raises(ExportError, match=r"is a FIFO \(named pipe\), not a regular file") \
            as ei:
        read_prov(fifo)
    assert ei.value.file == str(fifo)
