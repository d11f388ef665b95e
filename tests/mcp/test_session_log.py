"""The gateway's session log writes each gate decision as ``DecisionEntry`` (issue 26).

The line must stay what it was before the typed entry (``{**d.to_dict(), "task": task}``),
plus its ``digest`` (#29), and ``icore audit`` reads it back into the same entry.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from icore._line_seal import whole_digest
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


def _unchained(line: str) -> str:
    """A trace line without its ``chain`` link (#29) and its whole-line digest (QA
    qa-new14 S3), as the writer's JSON."""
    return json.dumps({k: v for k, v in json.loads(line).items()
                       if k not in ("chain", "digest")}, sort_keys=True)


def test_decision_lines_are_the_old_bytes_and_read_back(tmp_path: Path) -> None:
    d = _decision()
    trace = GatewayTrace("gw", tmp_path / "trace.jsonl")
    trace.decisions("client#1", "book", [d], task="client#1/1")
    trace.close()
    lines = (tmp_path / "trace.jsonl").read_text(encoding="utf-8").splitlines()
    pf = [_unchained(x) for x in lines if "planfence" in json.loads(x)]
    old = {"planfence": {"decision": d.entry(task="client#1/1").to_dict(digest=True)}}
    assert {**d.to_dict(), "task": "client#1/1"} == {  # the bytes before #29, and the digest
        k: v for k, v in old["planfence"]["decision"].items() if k != "digest"}
    assert pf == [json.dumps(old, sort_keys=True)]  # beside its link in the chain (#29)
    assert all(x["digest"] == whole_digest(x) for x in map(json.loads, lines)
               if "agent" in x or "planfence" in x)  # every line digested (qa-new14 S3)
    back = DecisionEntry.from_dict(json.loads(pf[0])["planfence"]["decision"])
    assert back == d.entry(task="client#1/1")


def test_a_decision_on_trusted_heads_says_so_where_the_audit_shows_it(
        tmp_path: Path) -> None:
    """A validation whose H(x) came from a ``trust_updates`` upstream (not read again) is
    named in the decision's detail: the report's validation caption and the lineage
    reason show it; a decision on re-read heads keeps its line unchanged."""
    from icore.report import trace_lineage

    bal = Record.create(key="acct://main/balance", owner="ledger", seq=1, content=500)
    ok = GateDecision(Outcome.AUTHORIZED, Reason.VALID, action="book", roots=(bal.id,),
                      deps=(bal.key,), frontier={bal.key: bal.id}, heads={bal.key: bal.id},
                      point=1, policy="planfence", owners_contacted=1, heads_checked=1)
    trace = GatewayTrace("gw", tmp_path / "trace.jsonl")
    trace.decisions("c#1", "book", [ok], task="c#1/1",
                    heads={"reread": [], "trusted": [bal.key]})
    trace.decisions("c#1", "book", [ok], task="c#1/2",
                    heads={"reread": [bal.key], "trusted": []})
    trace.close()
    lines = [json.loads(x) for x in (tmp_path / "trace.jsonl").read_text(
        encoding="utf-8").splitlines() if "planfence" in json.loads(x)]
    got = [x["planfence"]["decision"] for x in lines]
    assert got[0]["detail"] == ("H(x) of acct://main/balance taken on trust (trust_updates: "
                                "the upstream's subscription, not read again at this call)")
    # read again: the line as before (with its digest, #29)
    assert got[1] == ok.entry(task="c#1/2").to_dict(digest=True)
    rec = {"id": bal.id, "key": bal.key, "owner": bal.owner, "seq": bal.seq,
           "type": bal.type, "parents": [], "role": "input"}
    views = trace_lineage({"records": [rec], "decisions": got})
    assert "taken on trust" in views[0].reason and views[0].status == "valid"
    assert views[0].points[-1].detail == got[0]["detail"]  # the report's caption
    assert "trust" not in views[1].reason


def test_upstream_error_after_authorization_is_a_failed_action(tmp_path: Path) -> None:
    """A forwarded call the gate authorized whose upstream answered ``isError`` (issue
    28): its decision line carries the error, and ``icore audit`` counts it failed after
    authorization, its lineage still valid; a refused call's decision is left as is."""
    import subprocess
    import sys

    bal = Record.create(key="acct://main/balance", owner="ledger", seq=1, content=500)
    ok = GateDecision(Outcome.AUTHORIZED, Reason.VALID, action="pay", roots=(bal.id,),
                      deps=(bal.key,), frontier={bal.key: bal.id}, heads={bal.key: bal.id},
                      point=1, policy="planfence", owners_contacted=1, heads_checked=1)
    trace = GatewayTrace("gw", tmp_path / "trace.jsonl")
    trace.decisions("c#1", "pay", [ok], task="c#1/1")
    trace.call("c#1", "pay", {"amount": 5}, "bank says: account frozen", error=True,
               task="c#1/1")
    trace.decisions("c#1", "pay", [_decision()], task="c#1/2")
    trace.call("c#1", "pay", {"amount": 5}, "BLOCKED: stale", error=True, task="c#1/2",
               blocked=True)
    trace.close()
    got = [json.loads(x)["planfence"]["decision"] for x in (tmp_path / "trace.jsonl")
           .read_text(encoding="utf-8").splitlines() if "planfence" in json.loads(x)]
    assert [d.get("error") for d in got] == ["bank says: account frozen", None]
    js = tmp_path / "a.json"
    p = subprocess.run([sys.executable, "-m", "icore", "audit", str(tmp_path / "trace.jsonl"),
                        "--json", str(js)], capture_output=True, text=True, timeout=120,
                       check=False)
    assert p.returncode == 0, p.stderr
    assert "2 (1 failed after authorization, 1 blocked)" in p.stdout
    run = json.loads(js.read_text(encoding="utf-8"))["runs"][0]
    assert [(lv["status"], lv.get("error")) for lv in run["lineage"]] == [
        ("valid", "bank says: account frozen"), ("blocked", None)]


def test_a_link_put_at_the_trace_path_before_the_first_write_is_never_followed(
        tmp_path: Path) -> None:
    """The first write creates the trace exclusively: a link (or file) that appeared at
    the path is left as it is, its target untouched, and the final trace goes beside it
    (#29: never destroy what the user has)."""
    precious = tmp_path / "notes.txt"
    precious.write_text("my notes\n", encoding="utf-8")
    path = tmp_path / "trace.jsonl"
    path.symlink_to(precious)
    trace = GatewayTrace("gw", path)
    trace.session("s1", "client")  # the first flush: refused, kept in memory
    trace.close()
    assert precious.read_text(encoding="utf-8") == "my notes\n"
    assert path.is_symlink()
    assert trace.written_to == tmp_path / "trace-stopped-1.jsonl"
    first = json.loads(trace.written_to.read_text(encoding="utf-8").splitlines()[0])
    assert first["run"]["question"] == "MCP gateway gw"


def test_a_taken_temporary_name_sends_the_final_trace_beside_never_through_it(
        tmp_path: Path) -> None:
    """The stop's atomic rewrite never opens an existing temporary name (a link there is
    not followed); the trace goes to a free sibling instead."""
    import os

    precious = tmp_path / "notes.txt"
    precious.write_text("my notes\n", encoding="utf-8")
    path = tmp_path / "trace.jsonl"
    trace = GatewayTrace("gw", path)
    trace.session("s1", "client")
    (tmp_path / f"trace.jsonl.{os.getpid()}.tmp").symlink_to(precious)
    trace.close()
    assert precious.read_text(encoding="utf-8") == "my notes\n"
    assert trace.written_to == tmp_path / "trace-stopped-1.jsonl"
    assert any('"termination"' in x for x in
               trace.written_to.read_text(encoding="utf-8").splitlines())


def test_the_termination_is_on_disk_before_the_stops_rewrite(tmp_path: Path) -> None:
    """QA qa-mcp7 S3 (#25): the SDK's stdio client kills a gateway whose stop outlasts
    its grace; the termination line is appended to the live file before the rewrite, so
    a rewrite that never happens (here: its temporary name taken, the final trace goes
    beside) still leaves the live trace ended."""
    import os

    path = tmp_path / "trace.jsonl"
    trace = GatewayTrace("gw", path)
    trace.session("s1", "client")
    (tmp_path / f"trace.jsonl.{os.getpid()}.tmp").write_text("mine\n", encoding="utf-8")
    trace.close()
    assert trace.written_to == tmp_path / "trace-stopped-1.jsonl"
    live = [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines()]
    assert live[-1]["kind"] == "termination", live[-1]


def test_orphan_temporary_files_of_dead_stops_are_removed_at_claim(tmp_path: Path) -> None:
    """A stop killed mid-rewrite leaves ``<name>.<pid>.tmp``; the next gateway claiming
    the path removes those of dead processes that are empty or a trace, nothing else."""
    import os
    import subprocess
    import sys

    from icore.mcp._trace_claim import claim_trace

    def dead_pid() -> int:
        done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                              capture_output=True, text=True, check=True, timeout=60)
        return int(done.stdout)

    head = json.dumps({"run": {"id": "gw", "question": "MCP gateway gw"}}) + "\n"
    orphan = tmp_path / f"trace.jsonl.{dead_pid()}.tmp"
    empty = tmp_path / f"trace.jsonl.{dead_pid()}.tmp"
    live = tmp_path / f"trace.jsonl.{os.getpid()}.tmp"
    user = tmp_path / f"trace.jsonl.{dead_pid()}.tmp"
    orphan.write_text(head + '{"agent": "gateway", "ki', encoding="utf-8")
    empty.write_text("", encoding="utf-8")
    live.write_text(head, encoding="utf-8")
    user.write_text("my notes\n", encoding="utf-8")
    claim = claim_trace(tmp_path / "trace.jsonl")
    claim.release()
    assert claim.path == tmp_path / "trace.jsonl"
    assert not orphan.exists() and not empty.exists()
    assert live.exists() and user.read_text(encoding="utf-8") == "my notes\n"


def test_a_leftover_temporary_name_of_this_pid_is_taken_not_sidestepped(
        tmp_path: Path) -> None:
    """A stop killed under the same pid (PID 1 in a container) left an empty temporary
    file: the next stop removes it and rewrites the trace in place, rather than sending
    every later trace beside."""
    import os

    path = tmp_path / "trace.jsonl"
    tmp = tmp_path / f"trace.jsonl.{os.getpid()}.tmp"
    tmp.write_text("", encoding="utf-8")
    trace = GatewayTrace("gw", path)
    trace.session("s1", "client")
    trace.close()
    assert trace.written_to == path and not tmp.exists()
    assert not list(tmp_path.glob("trace-stopped-*"))


def test_a_file_at_the_path_before_the_first_write_sends_the_whole_run_beside(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Every event of the run reaches the sibling as it happens (not only at the stop),
    and the gateway says so once."""
    path = tmp_path / "trace.jsonl"
    path.write_text("my notes\n", encoding="utf-8")
    trace = GatewayTrace("gw", path)
    with caplog.at_level("WARNING", logger="icore.mcp"):
        for i in range(3):
            trace.session(f"s{i}", "client")
        side = tmp_path / "trace-stopped-1.jsonl"
        lines = side.read_text(encoding="utf-8").splitlines()
        assert sum('"session s' in x for x in lines) == 3
        trace.close()
    assert path.read_text(encoding="utf-8") == "my notes\n"
    assert trace.written_to == side
    said = [r for r in caplog.records if "left as it is" in r.getMessage()]
    assert len(said) == 1, [r.getMessage() for r in caplog.records]
