"""The console's protected-action lines (QA qa-new12 S3): a run that needs a look always
gets its line, however many clean runs come first; the clean ones past the first 20 are
counted in one line."""

from __future__ import annotations

from pathlib import Path

from tests._cli import CLI_ENV as _ENV
from typer.testing import CliRunner

from icore.cli import app
from icore.integrations import FenceGuard, RunRecorder
from icore.workspace import Workspace


def _run(folder: Path, name: str, *, times_out: bool) -> None:
    ws = Workspace({"slot/*": "clinic"})
    ws.put("slot/a", {"free": ["09:00"]}, by="clinic")
    desk = ws.agent("desk")
    desk.read("slot/a")
    rec = RunRecorder(name, question="book")
    guard = FenceGuard(agent=desk, depends_on={"slot/a"}, recorder=rec)

    def book(time: str) -> str:
        if times_out:
            raise TimeoutError("the clinic did not answer")
        return f"booked {time}"

    try:
        guard.run("book", book, {"time": "09:00"})
    except TimeoutError:
        pass
    rec.finish("desk", "done")
    rec.write(folder / f"{name}.jsonl")


def test_a_run_that_needs_a_look_is_never_cut_from_the_console(tmp_path: Path) -> None:
    for i in range(23):
        _run(tmp_path, f"run{i:02d}", times_out=False)
    _run(tmp_path, "run99", times_out=True)
    res = CliRunner().invoke(app, ["audit", str(tmp_path), "--no-report"], env=_ENV)
    assert res.exit_code == 0, res.output
    lines = [x for x in res.output.splitlines() if x.startswith("protected actions of")]
    assert len(lines) == 21, res.output
    assert lines[-1].startswith("protected actions of run99: 1 (1 outcome unknown)")
    assert "… 3 more run(s) whose protected actions are all valid or blocked" in res.output
