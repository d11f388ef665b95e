"""``icore compare A B``: how two audited runs differ (QA qa-new15c S3).

A and B are each a trace file (audited here, as ``icore audit`` would) or an ``icore
audit --json`` file. One run on each side: the two are compared whatever their ids;
more: runs are paired by id. For each pair: the metric deltas (B − A), the hard flags
and diagnoses present on one side only, and the per-agent count differences. Thin: reads
the ``--json`` entries (:func:`icore.cli._audit_json.run_json`), computes differences.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.table import Table

from icore._strict_json import strict_dumps
from icore.adapters import audit_file
from icore.cli._audit_json import run_json
from icore.cli._text import printable, shown
from icore.cli.inputs import nonempty_path, output_file

METRICS = ("snd", "astab", "cq", "cq_mean", "cq_min", "hard_flags", "diagnoses",
           "unsupported", "stalls", "replans", "steps")
"""The summary fields compared (``summary`` of ``--json``), in the order shown."""

SHOWN = 25
"""Rows of one table the console prints at most (``--json`` holds every one)."""


def load_side(path: Path) -> dict[str, dict[str, Any]]:
    """The runs of one side, by id.

    An ``icore audit --json`` file's ``runs``, else the ``--json`` entries of the trace
    file audited now.

    Raises:
        typer.BadParameter: the file is an ``icore audit --json`` file with no runs or a
            run with no ``id``/``summary``.
        AdapterError: as :func:`icore.adapters.audit_file` (a trace that cannot be read).
    """
    doc = _audit_json_doc(path)
    runs: list[dict[str, Any]]
    if doc is not None:
        runs = doc["runs"]
        if not runs or not all(isinstance(j, dict) and isinstance(j.get("id"), str)
                               and isinstance(j.get("summary"), dict) for j in runs):
            raise typer.BadParameter(f"{printable(str(path))}: an icore audit --json file "
                                     "with no runs, or a run with no id or summary")
    else:
        runs = [run_json(r, None, None) for r in audit_file(path)]
    return {j["id"]: j for j in runs}


def _audit_json_doc(path: Path) -> dict[str, Any] | None:
    if path.suffix.lower() != ".json" or not path.is_file():
        return None
    try:
        with path.open("rb") as f:
            head = f.read(64).lstrip()
        if not head.startswith(b"{") or b'"icore"' not in head:
            return None  # not written by icore audit --json (it starts {"icore": ...)
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError):
        return None
    if isinstance(doc, dict) and "icore" in doc and isinstance(doc.get("runs"), list):
        return doc
    return None


def _sig(kind: Any, agent: Any, detail: Any) -> str:
    """A flag's or diagnosis's identity across two runs.

    Its kind, agent and detail with numbers blanked (step numbers and ids differ
    between two recordings of one run).
    """
    return f"{kind} · {agent or '-'} · {re.sub(r'[0-9]+', '#', str(detail or ''))}"


def _one_side(a: list[dict[str, Any]], b: list[dict[str, Any]], kind: str,
              agent: str) -> dict[str, list[str]]:
    ca = Counter(_sig(x.get(kind), x.get(agent), x.get("detail")) for x in a)
    cb = Counter(_sig(x.get(kind), x.get(agent), x.get("detail")) for x in b)
    return {"only_a": sorted((ca - cb).elements()), "only_b": sorted((cb - ca).elements())}


def _delta(va: Any, vb: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"a": va, "b": vb}
    if isinstance(va, (int, float)) and isinstance(vb, (int, float)) \
            and not isinstance(va, bool) and not isinstance(vb, bool):
        out["delta"] = round(vb - va, 6)
    return out


def compare_runs(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """How run B differs from run A (two ``--json`` run entries).

    ``metrics``: each of :data:`METRICS` and each protected-action count as ``{"a",
    "b", "delta"}`` (delta = B − A); ``flags`` / ``diagnoses``: ``only_a`` / ``only_b``,
    each a list of ``"kind · agent · detail"`` (numbers in the detail blanked to ``#``:
    the same finding at another step matches); ``agents``: per agent, the counts that
    differ (``{"a", "b", "delta"}``; an agent missing on one side counts 0 there);
    ``agents`` is None when a side has no per-agent counts (a ``--json`` file written
    before they existed).
    """
    sa, sb = a["summary"], b["summary"]
    metrics = {m: _delta(sa.get(m), sb.get(m)) for m in METRICS if m in sa or m in sb}
    for st in sorted(set(a.get("actions", {})) | set(b.get("actions", {}))):
        metrics[f"actions.{st}"] = _delta(a.get("actions", {}).get(st, 0),
                                          b.get("actions", {}).get(st, 0))
    agents: dict[str, dict[str, Any]] | None = None
    if isinstance(a.get("agents"), dict) and isinstance(b.get("agents"), dict):
        agents = {}
        for name in sorted(set(a["agents"]) | set(b["agents"])):
            ra, rb = a["agents"].get(name, {}), b["agents"].get(name, {})
            diff = {c: _delta(ra.get(c, 0), rb.get(c, 0)) for c in sorted(set(ra) | set(rb))
                    if ra.get(c, 0) != rb.get(c, 0)}
            if diff:
                agents[name] = diff
    return {"a": a["id"], "b": b["id"], "metrics": metrics,
            "flags": _one_side(a.get("flags", []), b.get("flags", []), "kind", "agent"),
            "diagnoses": _one_side(a.get("diagnoses", []), b.get("diagnoses", []),
                                   "defect", "responsible"),
            "agents": agents}


def pair_runs(ra: dict[str, dict[str, Any]], rb: dict[str, dict[str, Any]]
              ) -> tuple[list[tuple[str, str]], list[str], list[str]]:
    """The ``(id in A, id in B)`` pairs compared, and the ids only in A and only in B.

    One run on each side: that pair. Else: the ids both sides have, in A's order.
    """
    if len(ra) == 1 and len(rb) == 1:
        return [(next(iter(ra)), next(iter(rb)))], [], []
    both = [i for i in ra if i in rb]
    return [(i, i) for i in both], [i for i in ra if i not in rb], [i for i in rb if i not in ra]


def changed(c: dict[str, Any]) -> bool:
    """A compared pair differs in a metric, a flag, a diagnosis or a per-agent count."""
    return any(m.get("delta", 0) != 0 or m["a"] != m["b"] for m in c["metrics"].values()) \
        or any(c[k]["only_a"] or c[k]["only_b"] for k in ("flags", "diagnoses")) \
        or bool(c["agents"])


def _num(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:+.3f}" if v else "0"
    return f"{v:+d}" if isinstance(v, int) and not isinstance(v, bool) and v else str(v)


def _val(v: Any) -> str:
    return f"{v:.3f}" if isinstance(v, float) else str(v)


def _print_pair(console: Console, c: dict[str, Any]) -> None:
    t = Table(title=f"A {shown(c['a'])}  vs  B {shown(c['b'])}")
    for col in ("metric", "A", "B", "Δ (B − A)"):
        t.add_column(col)
    for m, d in c["metrics"].items():
        if m.startswith("actions.") and not d["a"] and not d["b"]:
            continue
        t.add_row(m, _val(d["a"]), _val(d["b"]), _num(d.get("delta", "")))
    console.print(t)
    for what in ("flags", "diagnoses"):
        rows = [("A only", s) for s in c[what]["only_a"]] + [("B only", s)
                                                              for s in c[what]["only_b"]]
        if not rows:
            console.print(f"{what}: the same on both sides")
            continue
        t = Table(title=f"{what} on one side only ({len(rows)})")
        t.add_column("side")
        t.add_column("kind · agent · detail")
        for side, s in rows[:SHOWN]:
            t.add_row(side, shown(s[:300]))
        console.print(t)
        if len(rows) > SHOWN:
            console.print(f"… {len(rows) - SHOWN} more (see --json)")
    if c["agents"] is None:
        console.print("per-agent counts: not in both sides (a --json file from before "
                      "they existed)")
    elif not c["agents"]:
        console.print("per-agent counts: the same on both sides")
    else:
        t = Table(title="per-agent counts that differ")
        for col in ("agent", "count", "A", "B", "Δ"):
            t.add_column(col)
        for name, counts in c["agents"].items():
            for k, d in counts.items():
                t.add_row(shown(name), k, str(d["a"]), str(d["b"]), _num(d["delta"]))
        console.print(t)


def _print_many(console: Console, diffs: list[dict[str, Any]]) -> None:
    t = Table(title=f"runs that differ ({len(diffs)})")
    for col in ("run", "Δ snd", "Δ astab", "Δ cq", "Δ hard flags", "Δ diagnoses",
                "flags ±", "diagnoses ±", "agents"):
        t.add_column(col)
    for c in diffs[:SHOWN]:
        m = c["metrics"]
        t.add_row(shown(c["a"]), *(_num(m[k].get("delta", "")) if k in m else ""
                                       for k in ("snd", "astab", "cq", "hard_flags",
                                                 "diagnoses")),
                  *(f"-{len(c[k]['only_a'])} +{len(c[k]['only_b'])}"
                    for k in ("flags", "diagnoses")),
                  ", ".join(shown(a) for a in c["agents"] or ()))
    console.print(t)
    if len(diffs) > SHOWN:
        console.print(f"… {len(diffs) - SHOWN} more (see --json)")


def compare(
    a: Path = typer.Argument(..., parser=nonempty_path, help="Run A: a trace file or an "
                             "icore audit --json file."),
    b: Path = typer.Argument(..., parser=nonempty_path, help="Run B: the same kinds."),
    json_out: Path | None = typer.Option(
        None, "--json", parser=nonempty_path, help="Write the comparison as JSON here."),
) -> None:
    """Compare two audited runs (or two ``icore audit --json`` files, run by run).

    Prints the metric deltas (B − A), the hard flags and diagnoses found on one side
    only, and the per-agent counts that differ. ``--json``: ``{"pairs": [...],
    "only_a": [ids], "only_b": [ids]}``, each pair as :func:`compare_runs` plus
    ``changed``. Exit 0 whether or not the runs differ; 1 a side cannot be read; 2 bad
    arguments (a --json file that is one of the inputs).
    """
    console = Console(width=160, highlight=False)
    if json_out is not None and json_out.resolve() in (a.resolve(), b.resolve()):
        raise typer.BadParameter("is one of the inputs", param_hint="--json")
    with output_file(json_out, what="--json file") as jf:
        ra, rb = load_side(a), load_side(b)
        pairs, only_a, only_b = pair_runs(ra, rb)
        diffs = [compare_runs(ra[i], rb[j]) for i, j in pairs]
        for c in diffs:
            c["changed"] = changed(c)
        differ = [c for c in diffs if c["changed"]]
        if len(diffs) == 1:
            _print_pair(console, diffs[0])
        elif differ:
            _print_many(console, differ)
        console.print(f"{len(pairs)} run(s) compared, {len(differ)} differ"
                      + (f"; only in A: {len(only_a)}" if only_a else "")
                      + (f"; only in B: {len(only_b)}" if only_b else ""))
        if len(diffs) > 1 and any(c["agents"] is None for c in diffs):
            console.print("per-agent counts not compared: a side is a --json file from "
                          "before they existed")
        if jf is not None:
            jf.write(strict_dumps({"a": str(a), "b": str(b), "pairs": diffs,
                                   "only_a": only_a, "only_b": only_b},
                                  indent=1, default=str) + "\n")
            console.print(f"JSON comparison: {shown(str(json_out))}")


def register(app: typer.Typer, bench: typer.Typer) -> None:
    """Add ``icore compare``."""
    app.command("compare")(compare)


__all__ = ["METRICS", "SHOWN", "changed", "compare", "compare_runs", "load_side",
           "pair_runs", "register"]
