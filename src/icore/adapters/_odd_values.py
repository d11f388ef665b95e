"""Values a JSON trace line may hold that other readers refuse or no process gives.

Read by the JSONL importer (:mod:`icore.adapters._jsonl`), which warns naming the line
(#28, QA qa-new10 S4): the constants ``NaN`` / ``Infinity`` (Python's JSON reader takes
them, other readers refuse the line) and an ``exitcode`` outside what a process can
return. Pure: no I/O.
"""

from __future__ import annotations

import json

EXIT_MIN, EXIT_MAX = -(2 ** 31), 2 ** 32 - 1
"""The exit codes a process can report (a signed 32-bit status, a Windows DWORD)."""


def odd_constants(line: str) -> str:
    """The non-JSON constants (``NaN``, ``Infinity``, ``-Infinity``) of a line, named.

    ``""`` when none (the words inside strings do not count), or when the line does not
    read at all (the importer names that error itself).
    """
    seen: list[str] = []

    def note(word: str) -> float:
        if word not in seen:
            seen.append(word)
        return float(word)

    try:
        json.loads(line, parse_constant=note)
    except (ValueError, RecursionError):
        return ""
    return ", ".join(seen)


def odd_exit_code(code: int) -> str:
    """Why ``code`` (outside :data:`EXIT_MIN`..:data:`EXIT_MAX`) is warned, bounded."""
    text = str(code)
    return (f"exitcode {text[:24]}{'...' if len(text) > 24 else ''} is no process exit "
            f"code (outside {EXIT_MIN}..{EXIT_MAX}); read as a failure")
