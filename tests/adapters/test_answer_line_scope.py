"""An edited human answer naming no task fails only the actions it could have answered (#29).

Such an answer is linked by its tool and arguments (the first action of its tool with
equal arguments). Editing it (``approve`` made ``reject``, digest kept) made every
action of its tool ``INVALID``; now only those of its tool with its arguments (or whose
arguments are not recorded, and the one it is linked to) are, and every action of its
tool when it records no arguments or none has them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from icore.cli import app

from .test_line_digest import fenced, ship


def _recorded(tmp_path: Path, answer_args: dict[str, Any] | None) -> list[dict[str, Any]]:
    """Two valid calls of ``ship`` (Berlin, Munich); a human approved one, naming no task."""
    rec, _, _, guard = fenced()
    rec.add("reviewer", "thought", "yes", answered_by="human", decision="approve",
            tool="ship", args=answer_args)
    assert guard.run("ship", ship, {"city": "Berlin"}).executed
    assert guard.run("ship", ship, {"city": "Munich"}).executed
    rec.finish("shipper", "shipped")
    p = rec.write(tmp_path / "r.jsonl")
    return [json.loads(x) for x in p.read_text(encoding="utf-8").splitlines()]


def _audit(tmp_path: Path, lines: list[dict[str, Any]]) -> tuple[int, dict[str, str]]:
    p = tmp_path / "e.jsonl"
    p.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    js = tmp_path / "e.json"
    res = CliRunner().invoke(app, ["audit", str(p), "--no-report", "--json", str(js),
                                   "--fail-on", "invalid"])
    run = json.loads(js.read_text())["runs"][0]
    return res.exit_code, {lv["args"]["city"]: lv["status"]
                           for lv in run["lineage"]}


def _rejected(lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The human's approval edited into a rejection, its digest (and chain) kept."""
    out = [dict(x) for x in lines]
    ans = next(x for x in out if x.get("answered_by") == "human")
    ans["decision"] = "reject"
    return out


def test_the_honest_run_audits_clean(tmp_path: Path) -> None:
    assert _audit(tmp_path, _recorded(tmp_path, {"city": "Berlin"})) == (
        0, {"Berlin": "valid", "Munich": "valid"})


def test_only_the_actions_with_its_arguments_are_invalid(tmp_path: Path) -> None:
    code, got = _audit(tmp_path, _rejected(_recorded(tmp_path, {"city": "Berlin"})))
    assert code == 3 and got == {"Berlin": "INVALID", "Munich": "valid"}


def test_an_answer_with_no_arguments_or_unmatched_ones_fails_its_whole_tool(
        tmp_path: Path) -> None:
    for args in (None, {"city": "Lisbon"}):
        code, got = _audit(tmp_path, _rejected(_recorded(tmp_path, args)))
        assert code == 3 and got == {"Berlin": "INVALID", "Munich": "INVALID"}, args
