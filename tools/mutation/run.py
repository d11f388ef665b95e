"""Mutation testing of icore's safety lines with cosmic-ray (issue 30; ``make mutation``).

Not part of ``make test``: it runs each mutant against its area's tests, so it takes
minutes. What is mutated is listed in ``safety.toml``: per package (records, memory,
fence, net, state) the safety-check functions (by qualified name, so the selection does
not drift when lines move), the tests that guard them, and nothing else. Operators are
the ones that can break a check (comparisons, boolean operators, ``not``,
break/continue, arithmetic, loop bodies, exception types); type annotations are never
mutated (they are not evaluated).

The run works on a temporary copy of the worktree (a stopped run never leaves a mutant
in your files), writes ``results/mutation/summary.json`` and ``survivors.md``, and prints
the score per package: killed / (killed + survived), where a timeout counts as killed
and a survivor listed in ``equivalent.toml`` (with the reason it cannot change
behaviour) counts as neither.

Usage::

    nice -n 19 python tools/mutation/run.py [--package state] [--list] [--sample N]

``--sample N`` runs every N-th mutant of the stable (module, line, operator) order: a
systematic sample, for a machine where the whole set would take too long.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
from pathlib import Path

from cosmic_ray.work_db import WorkDB, use_db
from cosmic_ray.work_item import TestOutcome, WorkerOutcome, WorkResult

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
PLUGINS = ["-p", "no:cacheprovider", "-p", "pytest_timeout", "-p",
           "hypothesis.extra.pytestplugin"]


def _ranges(path: Path, names: list[str]) -> list[tuple[int, int, str]]:
    """Line ranges of the functions ``names`` (``Class.method`` or ``function``)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: dict[str, tuple[int, int]] = {}

    def walk(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                q = f"{prefix}{child.name}"
                assert child.end_lineno is not None
                found.setdefault(q, (child.lineno, child.end_lineno))
                if isinstance(child, ast.ClassDef):
                    walk(child, q + ".")

    walk(tree, "")
    missing = [n for n in names if n not in found]
    if missing:
        raise SystemExit(f"{path}: no function {missing} (update tools/mutation/safety.toml)")
    return [(*found[n], n) for n in names]


def _annotations(path: Path) -> list[tuple[tuple[int, int], tuple[int, int]]]:
    """Source spans of type annotations (never mutated).

    They are not evaluated (``from __future__ import annotations``), so a mutant inside
    one is equivalent by construction.
    """
    spans = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        anns: list[ast.expr | None] = []
        if isinstance(node, ast.arg):
            anns.append(node.annotation)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            anns.append(node.returns)
        elif isinstance(node, ast.AnnAssign):
            anns.append(node.annotation)
        for a in anns:
            if a is not None and a.end_lineno is not None and a.end_col_offset is not None:
                spans.append(((a.lineno, a.col_offset), (a.end_lineno, a.end_col_offset)))
    return spans


def _copy_repo(dst: Path) -> None:
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", ".hypothesis")
    for part in ("src", "tests", "examples"):
        shutil.copytree(REPO / part, dst / part, ignore=ignore)
    shutil.copy2(REPO / "pyproject.toml", dst / "pyproject.toml")


def _env(work: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(work / "src")
    env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    env["HYPOTHESIS_PROFILE"] = "mutation"
    return env


def _equivalent() -> list[dict[str, str]]:
    path = HERE / "equivalent.toml"
    if not path.exists():
        return []
    return list(tomllib.loads(path.read_text(encoding="utf-8")).get("mutant", []))


def _is_equivalent(module: str, function: str, diff: str, eq: list[dict[str, str]]) -> str:
    added = [ln[1:].strip() for ln in diff.splitlines()
             if ln.startswith("+") and not ln.startswith("+++")]
    for e in eq:
        if e["module"] == module and e["function"] == function and e["mutated"] in added:
            return e["reason"]
    return ""


def run_package(name: str, spec: dict, work: Path, operators: re.Pattern[str], *,
                list_only: bool, limit: int | None, timeout_s: float,
                sample: int = 1) -> dict:
    """Init, filter and execute one package's session; return its figures."""
    modules = spec["modules"]
    tests = spec["tests"]
    cmd = [sys.executable, "-m", "pytest", *tests, "-q", "-x", *PLUGINS]
    cfg = work / f"cr-{name}.toml"
    cfg.write_text(
        "[cosmic-ray]\n"
        f"module-path = {json.dumps(sorted(modules))}\n"
        f"timeout = {timeout_s}\n"
        "excluded-modules = []\n"
        f"test-command = {json.dumps(' '.join(cmd))}\n"
        "[cosmic-ray.distributor]\nname = \"local\"\n", encoding="utf-8")
    session = work / f"cr-{name}.sqlite"
    env = _env(work)
    subprocess.run([sys.executable, "-m", "cosmic_ray.cli", "init", str(cfg), str(session)],
                   cwd=work, env=env, check=True, capture_output=True)
    ranges = {m: _ranges(work / m, names) for m, names in modules.items()}
    annotations = {m: _annotations(work / m) for m in modules}
    keep: dict[str, str] = {}  # job id -> function
    skip: list[str] = []
    with use_db(str(session), WorkDB.Mode.open) as db:
        chosen: list[tuple[tuple[str, int, int, str, int], str, str]] = []
        for item in db.pending_work_items:
            mut = item.mutations[0]
            mod = str(mut.module_path)
            fn = next((q for lo, hi, q in ranges.get(mod, ())
                       if lo <= mut.start_pos[0] and mut.end_pos[0] <= hi), None)
            pos = tuple(mut.start_pos)
            in_annotation = any(lo <= pos < hi for lo, hi in annotations.get(mod, ()))
            if fn is None or in_annotation or not operators.search(mut.operator_name):
                skip.append(item.job_id)
            else:
                order = (mod, mut.start_pos[0], mut.start_pos[1], mut.operator_name,
                         mut.occurrence)
                chosen.append((order, item.job_id, fn))
        chosen.sort()
        for i, (_, job, fn) in enumerate(chosen):
            if i % sample == 0 and (limit is None or len(keep) < limit):
                keep[job] = fn
            else:
                skip.append(job)
        if skip:
            db.set_multiple_results(skip, WorkResult(output="not a safety line",
                                                     worker_outcome=WorkerOutcome.SKIPPED))
    print(f"{name}: {len(keep)} mutants on {sum(len(r) for r in ranges.values())} "
          f"safety functions ({len(skip)} skipped)", flush=True)
    if list_only:
        with use_db(str(session), WorkDB.Mode.open) as db:
            ops: dict[str, int] = {}
            for item in db.work_items:
                if item.job_id in keep:
                    op = item.mutations[0].operator_name.split("_")[0]
                    ops[op] = ops.get(op, 0) + 1
        print("  " + ", ".join(f"{k.removeprefix('core/')} {v}"
                               for k, v in sorted(ops.items(), key=lambda kv: -kv[1])))
        return {"mutants": len(keep)}
    base = subprocess.run(cmd, cwd=work, env=env, capture_output=True, text=True)
    if base.returncode != 0:
        raise SystemExit(f"{name}: the tests fail without mutation:\n{base.stdout[-2000:]}")
    t0 = time.monotonic()
    subprocess.run([sys.executable, "-m", "cosmic_ray.cli", "exec", str(cfg), str(session)],
                   cwd=work, env=env, check=True, capture_output=True)
    eq = _equivalent()
    killed = survived = equivalent = incompetent = 0
    survivors: list[dict[str, str]] = []
    with use_db(str(session), WorkDB.Mode.open) as db:
        for item, result in db.completed_work_items:
            if item.job_id not in keep:
                continue
            mut = item.mutations[0]
            fn = keep[item.job_id]
            if result.worker_outcome == WorkerOutcome.SKIPPED:
                continue
            if result.worker_outcome == WorkerOutcome.ABNORMAL or \
                    result.test_outcome == TestOutcome.KILLED:  # abnormal: a timeout
                killed += 1
            elif result.test_outcome == TestOutcome.INCOMPETENT or result.worker_outcome in (
                    WorkerOutcome.EXCEPTION, WorkerOutcome.NO_TEST):
                incompetent += 1
            else:
                why = _is_equivalent(str(mut.module_path), fn, result.diff or "", eq)
                if why:
                    equivalent += 1
                    continue
                survived += 1
                survivors.append({"module": str(mut.module_path), "function": fn,
                                  "operator": mut.operator_name,
                                  "line": str(mut.start_pos[0]), "diff": result.diff or ""})
    scored = killed + survived
    return {"mutants": len(keep), "killed": killed, "survived": survived,
            "equivalent": equivalent, "incompetent": incompetent,
            "score": round(killed / scored, 4) if scored else 1.0,
            "seconds": round(time.monotonic() - t0, 1), "survivors": survivors}


def main(argv: list[str] | None = None) -> int:
    """Run the mutation sessions; print and write the per-package scores."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--package", action="append", help="only this package (repeatable)")
    ap.add_argument("--list", action="store_true", help="count the mutants, run nothing")
    ap.add_argument("--limit", type=int, default=None, help="at most N mutants a package")
    ap.add_argument("--sample", type=int, default=1,
                    help="run every N-th mutant (in module, line, operator order)")
    ap.add_argument("--timeout", type=float, default=120.0, help="per mutant, seconds")
    ap.add_argument("--out", type=Path, default=REPO / "results" / "mutation")
    args = ap.parse_args(argv)
    conf = tomllib.loads((HERE / "safety.toml").read_text(encoding="utf-8"))
    operators = re.compile(conf["operators"])
    packages = {k: v for k, v in conf["package"].items()
                if not args.package or k in args.package}
    out: dict[str, dict] = {}
    with tempfile.TemporaryDirectory(prefix="icore-mutation-") as tmp:
        work = Path(tmp)
        _copy_repo(work)
        for name, spec in packages.items():
            out[name] = run_package(name, spec, work, operators, list_only=args.list,
                                    limit=args.limit, timeout_s=args.timeout,
                                    sample=args.sample)
            if not args.list:
                r = out[name]
                print(f"  {name}: {r['killed']}/{r['killed'] + r['survived']} killed "
                      f"({100 * r['score']:.1f}%), {r['equivalent']} equivalent, "
                      f"{r['incompetent']} incompetent, {r['seconds']} s", flush=True)
            if not args.list:
                _write(out, args)
    if args.list:
        return 0
    summary = _write(out, args)
    print(f"total: {summary['killed']}/{summary['killed'] + summary['survived']} killed "
          f"({100 * summary['score']:.1f}%); {args.out / 'summary.json'}")
    return 0


def _write(out: dict[str, dict], args: argparse.Namespace) -> dict:
    """Write summary.json and survivors.md for the packages run so far."""
    args.out.mkdir(parents=True, exist_ok=True)
    total_k = sum(r["killed"] for r in out.values())
    total_s = sum(r["survived"] for r in out.values())
    summary = {"sample": args.sample,
               "packages": {k: {f: v for f, v in r.items() if f != "survivors"}
                            for k, r in out.items()},
               "killed": total_k, "survived": total_s,
               "score": round(total_k / (total_k + total_s), 4) if total_k + total_s else 1.0}
    (args.out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n",
                                           encoding="utf-8")
    lines = ["# Surviving mutants of safety lines", ""]
    for k, r in out.items():
        for s in r["survivors"]:
            lines += [f"## {k}: {s['module']}:{s['line']} {s['function']} ({s['operator']})",
                      "", "```diff", s["diff"].strip(), "```", ""]
    (args.out / "survivors.md").write_text("\n".join(lines), encoding="utf-8")
    return summary


if __name__ == "__main__":
    raise SystemExit(main())
