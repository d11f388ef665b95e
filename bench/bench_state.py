"""Benchmark of the iCORE state (issue 5). Same as ``icore bench state``.

Usage: ``.venv/bin/python bench/bench_state.py [--quick]``
"""

from __future__ import annotations

import sys

from icore_lab.bench.micro._state import run


def main(argv: list[str]) -> None:
    """Run the benchmark (``--quick`` for a smoke run)."""
    if "--quick" in argv:
        run((200, 1000), samples=100, speedup_at=2000, rebuild_entries=5000, memory_at=1000)
    else:
        run()


if __name__ == "__main__":
    main(sys.argv[1:])
