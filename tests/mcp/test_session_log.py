"""The gateway's session log writes each gate decision as ``DecisionEntry`` (issue 26).

The line must stay what it was before the typed entry (``{**d.to_dict(), "task": task}``),
and ``icore audit`` reads it back into the same entry.
"""

from __future__ import annotations

import json
from pathlib import Path

from icore.fence import DecisionEntry, GateDecision, Outcome, Reason
from icore.mcp import GatewayTrace
from icore.records import Record


def _decision() -> GateDecision:
    fresh = Record.create(key="memo://price", owner="trip", seq=2, content={"v": 2})
    return GateDecision(Outcome.REPLAN_REQUIRED, Reason.STALE, action="book",
                        roots=("r1",), deps=("memo://price",),
                        frontier={"memo://price": "old"}, heads={"memo://price": fresh.id},
                        fresh={"memo://price": fresh}, point=3, at_ms=12.5,
                        policy="planfence", detail="price changed", owners_contacted=1,
                        heads_checked=1)


def test_decision_lines_are_the_old_bytes_and_read_back(tmp_path: Path) -> None:
    d = _decision()
    trace = GatewayTrace("gw", tmp_path / "trace.jsonl")
    trace.decisions("client#1", "book", [d], task="client#1/1")
    trace.close()
    lines = (tmp_path / "trace.jsonl").read_text(encoding="utf-8").splitlines()
    pf = [x for x in lines if x.startswith('{"planfence"')]
    old = {"planfence": {"decision": {**d.to_dict(), "task": "client#1/1"}}}
    assert pf == [json.dumps(old, sort_keys=True)]
    back = DecisionEntry.from_dict(json.loads(pf[0])["planfence"]["decision"])
    assert back == d.entry(task="client#1/1")
