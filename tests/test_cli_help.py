"""``icore COMMAND -h`` reads as prose at any terminal width (QA qa-new13a S4).

The help comes from each command's docstring, whose lines are wrapped for the source:
rendered as Markdown, a paragraph is rewrapped to the terminal, and ``x`` is shown as
code, not as the reStructuredText backticks. Real parts: the ``icore`` command in a
subprocess, at 80 and 120 columns.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

COMMANDS = [["audit"], ["run"], ["serve"], ["mcp"], ["certs", "init"],
            ["bench", "integrations"]]


def _description(command: list[str], columns: int) -> list[list[str]]:
    """The paragraphs of a command's help before its first panel, as lists of lines."""
    out = subprocess.run([sys.executable, "-m", "icore", *command, "-h"],
                         capture_output=True, text=True, timeout=60, check=True,
                         env={**os.environ, "COLUMNS": str(columns), "NO_COLOR": "1"}).stdout
    text = out.split("╭", 1)[0]
    paragraphs: list[list[str]] = [[]]
    for line in text.splitlines():
        if line.strip():
            paragraphs[-1].append(line.strip())
        elif paragraphs[-1]:
            paragraphs.append([])
    return [p for p in paragraphs if p and not p[0].startswith("Usage:")]


@pytest.mark.parametrize("columns", [80, 120])
@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
def test_help_paragraphs_are_rewrapped_and_show_no_rst(command: list[str],
                                                       columns: int) -> None:
    paragraphs = _description(command, columns)
    assert paragraphs, command
    for p in paragraphs:
        joined = " ".join(p)
        assert "``" not in joined, joined
        # a hard line break of the docstring left in place leaves a short line inside a
        # paragraph ("entry", "never", ...): every line but a paragraph's last is full
        for line in p[:-1]:
            assert len(line) > columns * 0.6, (line, joined)
