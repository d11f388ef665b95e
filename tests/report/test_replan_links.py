"""Which call replanned which: only what the trace records (#28, QA qa-crew S2).

Two recorded runs of the QA report: a CrewAI message with two ``book_venue`` calls on a
changed venue (both refused stale, neither the other's replan: the trace has no replan
line), and an ``icore mcp`` gateway stress run (six sessions and a writer on two
venues: the gateway's plan lines record 6 replans, each in its own session; the old
pairing by tool and D(a) drew links across sessions). The pictures, the console's
``--json`` lineage and the HTML report link a stale call only to the call the trace's
plan lines name as its replan.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from icore.adapters import audit_file, load_jsonl
from icore.report import trace_lineage

DATA = Path(__file__).parent / "data"
SIBLINGS = DATA / "crewai_parallel_siblings.jsonl"
STRESS = DATA / "mcp_stress_replans.jsonl"


def _links(path: Path) -> dict[str, str]:
    """Stale action -> the action the report names as its replan."""
    views = trace_lineage(load_jsonl(path).extras["planfence"])
    out = {}
    for v in views:
        if v.reason.startswith("stale → replanned as "):
            out[v.id] = v.reason.removeprefix("stale → replanned as ").split(",")[0]
    return out


def _session(action: str) -> str:
    return action.rsplit("/", 1)[0]


def test_sibling_calls_of_one_message_are_not_each_others_replan() -> None:
    """Both stale siblings stay blocked, unlinked (main: the second was "replan of" the
    first, though its gate line says ``replanned: false`` and it cites v1)."""
    views = trace_lineage(load_jsonl(SIBLINGS).extras["planfence"])
    stale = [v for v in views if v.status == "blocked" and "stale" in v.reason]
    assert [v.id for v in stale] == ["book_venue-1", "book_venue-2"]
    assert all(v.reason.startswith("BLOCKED (fail closed)") for v in stale)
    assert _links(SIBLINGS) == {}


def test_gateway_replans_are_linked_within_their_session_only() -> None:
    """The stress run: one link per recorded replan (6), each within one session; the
    audit's ``replans`` count agrees (main drew cross-session links, e.g. ag0 → ag5)."""
    links = _links(STRESS)
    assert all(_session(a) == _session(b) for a, b in links.items()), links
    (result,) = audit_file(STRESS)
    assert len(links) == result.summary().replans == 6
    assert links["ag3#4@8d64db/26"] == "ag3#4@8d64db/35"
    assert "ag0#3@8d64db/8" not in links  # refused stale; its session never replanned


def test_console_json_and_html_say_the_same(tmp_path: Path) -> None:
    """``icore audit --json`` and the HTML report carry the same links."""
    out, js = tmp_path / "rep", tmp_path / "a.json"
    cli = subprocess.run([sys.executable, "-m", "icore", "audit", str(STRESS), "--out",
                          str(out), "--json", str(js)], capture_output=True, text=True,
                         timeout=300, check=False)
    assert cli.returncode == 0, cli.stderr
    (run,) = json.loads(js.read_text())["runs"]
    said = {lv["action"]: lv["reason"] for lv in run["lineage"]}
    linked = [a for a, r in said.items() if r.startswith("stale → replanned as")]
    assert sorted(linked) == sorted(_links(STRESS))
    (page,) = [p for p in out.glob("*.html") if p.name != "index.html"]
    html = page.read_text()
    shown = set(re.findall(r"stale → replanned as ([^,<]+),", html))
    assert shown == set(_links(STRESS).values())
    assert "replanned as ag5#6@8d64db/11" not in html  # main: ag0's call, ag5's replan


@settings(max_examples=40, deadline=None)
@given(st.permutations(range(4)), st.lists(st.booleans(), min_size=4, max_size=4))
def test_links_follow_the_plan_lines_whatever_the_order(order: list[int],
                                                        says: list[bool]) -> None:
    """Four stale calls of one tool on one fact, by four sessions in any order: a link is
    drawn exactly where a replan line pairs a stale call with its session's next call."""
    from icore.adapters import trace_lineages

    def rid(n: int, k: int) -> str:
        return f"{n:032x}{k:032x}"

    decisions, replans, want = [], [], {}
    for n in order:
        for k in (0, 1):
            decisions.append({"action": "book", "task": f"s{n}/{k}", "roots": [rid(n, k)],
                              "deps": ["venue/a"], "outcome": "replan_required" if k == 0
                              else "authorized", "reason": "stale" if k == 0 else "valid",
                              "replanned": False, "policy": "planfence"})
        if says[n]:
            replans.append({"stale": [rid(n, 0)], "replan": [rid(n, 1)]})
            want[f"s{n}/0"] = f"s{n}/1"
    got = {a.action: a.replanned_as for a in trace_lineages(
        {"records": [], "decisions": decisions, "replans": replans}) if a.replanned_as}
    assert got == want
