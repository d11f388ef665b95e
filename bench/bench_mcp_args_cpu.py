"""CPU per argument check of the ``icore mcp`` gateway, with and without formats (#25).

The gateway checks every ``tools/call``'s arguments against the tool's input schema
before forwarding it (``icore.mcp._gateway_args.ArgChecks``); since QA r7-mcp D5 the
string formats ``date``, ``date-time``, ``time`` and ``uuid`` are checked too. This
prints the CPU time (:func:`time.process_time`) per valid call for a schema as the SDK
writes it for ``book_day(city: str, day: date, at: datetime | None, ref: UUID | None)``,
and for the same schema with its ``format`` keywords removed, alternated round by round
so a loaded machine hits both alike.

Usage::

    PYTHONPATH=src python bench/bench_mcp_args_cpu.py [--n 20000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import copy
import time
from types import SimpleNamespace
from typing import Any

from icore.mcp._gateway_args import ArgChecks

SCHEMA: dict[str, Any] = {
    "type": "object", "required": ["city", "day"],
    "properties": {
        "city": {"type": "string"},
        "day": {"type": "string", "format": "date"},
        "at": {"anyOf": [{"type": "string", "format": "date-time"}, {"type": "null"}],
               "default": None},
        "ref": {"anyOf": [{"type": "string", "format": "uuid"}, {"type": "null"}],
                "default": None}}}
ARGS = {"city": "Porto", "day": "2026-12-06", "at": "2026-12-06T10:00:00",
        "ref": "12345678-1234-5678-1234-567812345678"}


def _plain(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` without its ``format`` keywords."""
    out = copy.deepcopy(schema)
    out["properties"]["day"].pop("format")
    for k in ("at", "ref"):
        out["properties"][k]["anyOf"][0].pop("format")
    return out


def cpu_us(schema: dict[str, Any], n: int) -> float:
    """CPU microseconds per :meth:`ArgChecks.problem` of :data:`ARGS` (valid) under ``schema``."""
    tool = SimpleNamespace(input_schema=schema)
    checks = ArgChecks(lambda: {"t": tool})
    assert checks.problem("t", ARGS) is None  # compiled, and the arguments are valid
    t0 = time.process_time()
    for _ in range(n):
        checks.problem("t", ARGS)
    return (time.process_time() - t0) / n * 1e6


def main() -> None:
    """Print each round's figures, then the medians."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=20000, help="checks per configuration a round")
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    got: dict[str, list[float]] = {"formats": [], "no formats": []}
    for r in range(a.rounds):
        for name, schema in (("formats", SCHEMA), ("no formats", _plain(SCHEMA))):
            got[name].append(cpu_us(schema, a.n))
            print(f"round {r}: {name:10s} {got[name][-1]:6.1f} us CPU per call")
    for name, xs in got.items():
        print(f"median {name:10s} {sorted(xs)[len(xs) // 2]:6.1f} us CPU per call")


if __name__ == "__main__":
    main()
