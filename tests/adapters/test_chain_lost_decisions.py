"""Every decision line deleted: the broken chain still fails the run (QA qa-new13a S2).

The chain's warning said every protected action was ``INVALID``, but the actions are
counted from the decisions, so with all of them deleted the audit counted none and
exited 0 under ``--fail-on invalid``. Now each action record no decision cites is an
``INVALID`` action, and a run whose chain breaks fails ``--fail-on invalid`` whatever
it counts (``"chain_broken"`` in its ``--json`` entry).
"""

from __future__ import annotations

from pathlib import Path

from .test_line_chain import _audit
from .test_line_digest import _lines, _recorded, _write


def test_every_decision_deleted_counts_the_action_records_invalid(tmp_path: Path) -> None:
    lines = [x for x in _lines(_recorded(tmp_path))
             if "decision" not in x.get("planfence", {})]
    code, run = _audit(tmp_path, _write(tmp_path / "nodec.jsonl", lines))
    assert code == 3
    assert run["actions"]["total"] == run["actions"]["INVALID"] == 2  # two calls made
    assert all(lv["record"] and "gate decisions are not in the trace" in lv["reason"]
               for lv in run["lineage"])
    assert "breaks" in run["chain_broken"]


def test_every_planfence_line_deleted_still_fails_on_the_broken_chain(tmp_path: Path
                                                                      ) -> None:
    lines = [x for x in _lines(_recorded(tmp_path)) if "planfence" not in x]
    code, run = _audit(tmp_path, _write(tmp_path / "nopf.jsonl", lines))
    assert code == 3 and run["actions"]["total"] == 0
    assert "breaks" in run["chain_broken"]


def test_an_honest_run_has_no_chain_broken_key(tmp_path: Path) -> None:
    code, run = _audit(tmp_path, _recorded(tmp_path))
    assert code == 0 and "chain_broken" not in run
