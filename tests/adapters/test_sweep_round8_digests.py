"""Round 8 of the bad-input sweep (#29): decision digests stripped, event digests kept.

Only icore's recorders digest human-answer / tool-outcome lines, and they digest every
decision line too. A trace holding event-line digests but decision lines without one
was edited: a stale refusal rewritten ``authorized`` (its heads made its frontier) with
every decision digest dropped read ``valid`` with exit 0 under ``--fail-on invalid``.
Now each undigested decision there is ``INVALID``, named in a warning. The other way
round (decisions digested, event lines not) stays a note: another writer may digest its
decisions through the public ``DecisionEntry.to_dict(digest=True)`` alone. Real files,
the real ``icore`` command in a subprocess.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.adapters.test_line_digest import _lines, _recorded, _unmarked, _write

_SRC = str(Path(__file__).resolve().parents[2] / "src")


def _audit(tmp_path: Path, trace: Path) -> tuple[int, dict[str, Any], str]:
    js = tmp_path / f"{trace.stem}.json"
    env = {**os.environ, "PYTHONPATH": _SRC, "COLUMNS": "200"}
    r = subprocess.run([sys.executable, "-m", "icore", "audit", str(trace), "--no-report",
                        "--json", str(js), "--fail-on", "invalid"], capture_output=True,
                       text=True, env=env, timeout=300, check=False)
    run = json.loads(js.read_text())["runs"][0]
    return r.returncode, run, r.stdout + r.stderr


def _status(run: dict[str, Any]) -> dict[str, tuple[str, Any]]:
    return {lv["action"]: (lv["status"], lv.get("human")) for lv in run["lineage"]}


def test_a_refusal_forged_valid_with_every_decision_digest_dropped_is_invalid(
        tmp_path: Path) -> None:
    lines = _lines(_recorded(tmp_path))
    for x in lines:
        d = x.get("planfence", {}).get("decision")
        if d:
            del d["digest"]
            if d["outcome"] != "authorized":
                d.update(outcome="authorized", reason="valid", heads=dict(d["frontier"]),
                         fresh={}, detail="")
    code, run, out = _audit(tmp_path, _write(tmp_path / "dec.jsonl", lines))
    assert code == 3, out
    assert _status(run)["ship-1"][0] == "INVALID"
    assert "carries no digest while the trace's human-answer / tool-outcome lines do" in out


def _strip_events(lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The event lines' digests, every chain link and seal dropped; the decisions' kept."""
    for x in lines:
        if "run" not in x:
            x.pop("digest", None)
        x.pop("chain", None)  # a writer that digests its decisions alone chains nothing
        x.pop("chain_end", None)
    return lines


def test_event_lines_without_digests_beside_digested_decisions_are_only_noted(
        tmp_path: Path) -> None:
    """Without the writer marker (another writer, or icore before it): a note."""
    lines = _unmarked(_strip_events(_lines(_recorded(tmp_path))))
    code, run, out = _audit(tmp_path, _write(tmp_path / "ev.jsonl", lines))
    assert code == 0, out
    assert _status(run) == {"ship-1": ("blocked", "rejected"), "ship-2": ("valid", None)}
    assert "human-answer / tool-outcome line(s) carry no digest" in out


def test_a_rejection_edited_into_an_approval_with_event_digests_dropped_is_invalid(
        tmp_path: Path) -> None:
    """The header's writer marker promises every event line's digest: the edit is seen.

    Before the marker this read as recorded: "approved by a human", exit 0 under
    ``--fail-on invalid``.
    """
    lines = _strip_events(_lines(_recorded(tmp_path)))
    (n, ans), = [(n, x) for n, x in enumerate(lines, 1) if x.get("answered_by") == "human"]
    ans["decision"] = "approve"
    code, run, out = _audit(tmp_path, _write(tmp_path / "approve.jsonl", lines))
    assert code == 3, out
    assert {st for st, _ in _status(run).values()} == {"INVALID"}
    assert any(w.startswith(f"{tmp_path}/approve.jsonl: line {n} carries no digest")
               and "writer marker promises" in w for w in run["warnings"]), run["warnings"]
    assert not [w for w in run["warnings"] if "audited as recorded" in w]


def test_a_trace_with_no_digest_at_all_is_still_read_as_recorded(tmp_path: Path) -> None:
    lines = _unmarked(_lines(_recorded(tmp_path)))
    for x in lines:  # as before #29: no marker, no digest, and so no chain
        x.pop("digest", None)
        x.get("planfence", {}).get("decision", {}).pop("digest", None)
        x.pop("chain", None)
        x.pop("chain_end", None)
    code, run, out = _audit(tmp_path, _write(tmp_path / "old.jsonl", lines))
    assert code == 0, out
    assert _status(run) == {"ship-1": ("blocked", "rejected"), "ship-2": ("valid", None)}
    assert "audited as recorded" in out


def test_a_huge_value_in_a_decision_field_is_refused_in_a_short_message(
        tmp_path: Path) -> None:
    """A decision's ``point`` (an integer) or ``replanned`` (a boolean) given a 1 MB
    string: the refusal named the file and field but quoted the whole value, a 1 MB
    error line (sweep round 8); now it is cut (``icore.errors.brief``)."""
    for field in ("point", "replanned"):
        lines = _lines(_recorded(tmp_path))
        (d, *_) = [x["planfence"]["decision"] for x in lines
                   if "decision" in x.get("planfence", {})]
        d[field] = "x" * (1 << 20)
        p = _write(tmp_path / f"{field}.jsonl", lines)
        env = {**os.environ, "PYTHONPATH": _SRC, "COLUMNS": "200"}
        r = subprocess.run([sys.executable, "-m", "icore", "audit", str(p), "--no-report"],
                           capture_output=True, text=True, env=env, timeout=300,
                           check=False)
        out = r.stdout + r.stderr
        assert r.returncode == 1 and len(out) < 4000, (r.returncode, len(out))
        assert f"{field}.jsonl" in out and f"planfence.decision.{field}" in out, out
