"""Mutation testing of icore's safety lines with cosmic-ray (issue 30; ``make mutation``).

Not part of ``make test``: it runs each mutant against the tests that cover its module,
so a full run takes a while. What is mutated is listed in ``safety.toml``: per package
(records, memory, fence, net, state) the safety-check functions (by qualified name, so
the selection does not drift when lines move) and, per module, the tests that guard them
(run with ``-x -q -p no:randomly -p no:cacheprovider``, no xdist, fastest file first).
Operators are the ones that can break a check (comparisons, boolean operators, ``not``,
break/continue, arithmetic, loop bodies, exception types); type annotations are never
mutated (they are not evaluated).

One cosmic-ray session (SQLite) per module persists under ``--sessions``
(``results/mutation/sessions``, never committed), so a run can be stopped (``--budget-min``,
Ctrl-C) and resumed: the next run executes only the pending mutants. A session is rebuilt
when its module's source, its function list, its tests or the operators change, so its
results never describe other code. Each worker mutates its own fresh copy of the worktree
(a stopped run never leaves a mutant in your files).

The run writes ``results/mutation/summary.json`` and ``survivors.md`` and prints, per
package and in total, killed / scored and the percentage, how many of the selected
mutants have run, and whether the target (>= 90 % killed, issue 30) is met. Scored is
killed + survived: a timeout counts as killed, and a survivor listed in
``equivalent.toml`` (with the reason it cannot change behaviour) counts as neither.

Usage::

    nice -n 19 python tools/mutation/run.py [--package state] [--list] [--sample N]
        [--budget-min M] [--jobs J] [--rerun-survivors] [--report]

``--sample N`` runs every N-th mutant of the stable (module, line, operator) order: a
systematic sample, for a machine where the whole set would take too long.
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import json
import os
import queue
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import threading
import time
import tomllib
from pathlib import Path

from cosmic_ray.work_db import WorkDB, use_db
from cosmic_ray.work_item import TestOutcome, WorkerOutcome, WorkResult

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
TARGET = 0.90
PYTEST = ["-x", "-q", "-p", "no:randomly", "-p", "no:cacheprovider", "-p", "pytest_timeout",
          "-p", "hypothesis.extra.pytestplugin"]
NOT_SAFETY = "not a safety line"
NOT_SAMPLED = "outside the sample"


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
    if dst.exists():
        shutil.rmtree(dst)
    dst.mkdir(parents=True)
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


class Unit:
    """One module's mutation session: its functions, its tests, its SQLite file."""

    def __init__(self, package: str, module: str, names: list[str], tests: list[str],
                 sessions: Path, operators: str, sample: int) -> None:
        self.package, self.module, self.names, self.tests = package, module, names, tests
        self.key = f"{package}--{Path(module).stem.lstrip('_')}"
        self.db = sessions / f"{self.key}.sqlite"
        self.meta = sessions / f"{self.key}.json"
        source = (REPO / module).read_bytes()
        self.fingerprint = hashlib.sha256(json.dumps(
            [source.hex(), names, tests, operators, sample]).encode()).hexdigest()
        self.ranges = _ranges(REPO / module, names)

    def command(self) -> list[str]:
        """The pytest command line of this module's tests."""
        return [sys.executable, "-m", "pytest", *self.tests, *PYTEST]

    def config(self, work: Path, timeout_s: float) -> Path:
        """Write the cosmic-ray config of this session into ``work``; return its path."""
        cfg = work / f"cr-{self.key}.toml"
        cfg.write_text(
            "[cosmic-ray]\n"
            f"module-path = {json.dumps(self.module)}\n"
            f"timeout = {timeout_s}\n"
            "excluded-modules = []\n"
            f"test-command = {json.dumps(' '.join(self.command()))}\n"
            "[cosmic-ray.distributor]\nname = \"local\"\n", encoding="utf-8")
        return cfg

    def function_of(self, line_lo: int, line_hi: int) -> str | None:
        """The selected function holding lines ``line_lo``..``line_hi``, or None."""
        return next((q for lo, hi, q in self.ranges if lo <= line_lo and line_hi <= hi), None)

    def ensure(self, work: Path, operators: re.Pattern[str], sample: int) -> None:
        """Create (or rebuild, if the code or the selection changed) the session."""
        if self.db.exists() and self.meta.exists() and json.loads(
                self.meta.read_text(encoding="utf-8")).get("fingerprint") == self.fingerprint:
            return
        self.db.unlink(missing_ok=True)
        cfg = self.config(work, 60.0)
        subprocess.run([sys.executable, "-m", "cosmic_ray.cli", "init", str(cfg), str(self.db)],
                       cwd=work, env=_env(work), check=True, capture_output=True)
        annotations = _annotations(REPO / self.module)
        skip: list[str] = []
        chosen: list[tuple[tuple[int, int, str, int], str]] = []
        with use_db(str(self.db), WorkDB.Mode.open) as db:
            for item in db.pending_work_items:
                mut = item.mutations[0]
                pos = tuple(mut.start_pos)
                fn = self.function_of(mut.start_pos[0], mut.end_pos[0])
                in_annotation = any(lo <= pos < hi for lo, hi in annotations)
                if fn is None or in_annotation or not operators.search(mut.operator_name):
                    skip.append(item.job_id)
                else:
                    chosen.append(((mut.start_pos[0], mut.start_pos[1], mut.operator_name,
                                    mut.occurrence), item.job_id))
            chosen.sort()
            out = [job for i, (_, job) in enumerate(chosen) if i % sample]
            if skip:
                db.set_multiple_results(skip, WorkResult(output=NOT_SAFETY,
                                                         worker_outcome=WorkerOutcome.SKIPPED))
            if out:
                db.set_multiple_results(out, WorkResult(output=NOT_SAMPLED,
                                                        worker_outcome=WorkerOutcome.SKIPPED))
        self.meta.write_text(json.dumps({"fingerprint": self.fingerprint,
                                         "module": self.module}) + "\n", encoding="utf-8")

    def counts(self) -> tuple[int, int]:
        """(selected, pending) mutants of this session."""
        with sqlite3.connect(self.db) as con:
            total = con.execute("SELECT count(*) FROM work_items").fetchone()[0]
            skipped = con.execute("SELECT count(*) FROM work_results WHERE output IN (?, ?)",
                                  (NOT_SAFETY, NOT_SAMPLED)).fetchone()[0]
            done = con.execute("SELECT count(*) FROM work_results").fetchone()[0]
        return total - skipped, total - done

    def rerun_survivors(self) -> int:
        """Make this session's survivors pending again (after new tests)."""
        with sqlite3.connect(self.db) as con:
            n = con.execute("DELETE FROM work_results WHERE test_outcome = 'SURVIVED' "
                            "AND worker_outcome = 'NORMAL'").rowcount
        return n

    def score(self, eq: list[dict[str, str]]) -> dict:
        """Figures of the completed mutants of this session."""
        killed = survived = equivalent = incompetent = 0
        survivors: list[dict[str, str]] = []
        with use_db(str(self.db), WorkDB.Mode.open) as db:
            for item, result in db.completed_work_items:
                if result.worker_outcome == WorkerOutcome.SKIPPED:
                    continue
                mut = item.mutations[0]
                fn = self.function_of(mut.start_pos[0], mut.end_pos[0]) or "?"
                if result.worker_outcome == WorkerOutcome.ABNORMAL or \
                        result.test_outcome == TestOutcome.KILLED:  # abnormal: a timeout
                    killed += 1
                elif result.test_outcome == TestOutcome.INCOMPETENT or result.worker_outcome in (
                        WorkerOutcome.EXCEPTION, WorkerOutcome.NO_TEST):
                    incompetent += 1
                elif why := _is_equivalent(self.module, fn, result.diff or "", eq):
                    del why
                    equivalent += 1
                else:
                    survived += 1
                    survivors.append({"module": self.module, "function": fn,
                                      "operator": mut.operator_name,
                                      "line": str(mut.start_pos[0]), "diff": result.diff or ""})
        selected, pending = self.counts()
        return {"selected": selected, "pending": pending, "killed": killed,
                "survived": survived, "equivalent": equivalent, "incompetent": incompetent,
                "survivors": survivors}


def _execute(unit: Unit, work: Path, deadline: float, log: queue.Queue[str]) -> None:
    """Run the pending mutants of ``unit`` in ``work`` until done or ``deadline``."""
    _, pending = unit.counts()
    if not pending or time.monotonic() >= deadline:
        return
    env = _env(work)
    t0 = time.monotonic()
    base = subprocess.run(unit.command(), cwd=work, env=env, capture_output=True, text=True)
    if base.returncode != 0:
        raise SystemExit(f"{unit.key}: its tests fail without mutation:\n{base.stdout[-2000:]}")
    timeout_s = max(30.0, 5 * (time.monotonic() - t0))
    cfg = unit.config(work, timeout_s)
    log.put(f"{unit.key}: {pending} pending (tests {time.monotonic() - t0:.1f} s)")
    proc = subprocess.Popen([sys.executable, "-m", "cosmic_ray.cli", "exec", str(cfg),
                             str(unit.db)], cwd=work, env=env, start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        while proc.poll() is None:
            if time.monotonic() >= deadline:
                os.killpg(proc.pid, signal.SIGKILL)  # the copy is refreshed next run
                proc.wait()
                break
            time.sleep(1.0)
    except BaseException:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        raise


def main(argv: list[str] | None = None) -> int:
    """Run (or resume) the mutation sessions; print and write the scores."""
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    ap.add_argument("--package", action="append", help="only this package (repeatable)")
    ap.add_argument("--list", action="store_true", help="count the mutants, run nothing")
    ap.add_argument("--report", action="store_true", help="print the scores, run nothing")
    ap.add_argument("--sample", type=int, default=1,
                    help="run every N-th mutant (in module, line, operator order)")
    ap.add_argument("--budget-min", type=float, default=None,
                    help="stop after M minutes (resume with the same command)")
    ap.add_argument("--jobs", type=int, default=1, help="sessions run at once (default 1)")
    ap.add_argument("--rerun-survivors", action="store_true",
                    help="run the survivors again (after adding tests)")
    ap.add_argument("--sessions", type=Path, default=REPO / "results" / "mutation" / "sessions")
    ap.add_argument("--out", type=Path, default=REPO / "results" / "mutation")
    args = ap.parse_args(argv)
    conf = tomllib.loads((HERE / "safety.toml").read_text(encoding="utf-8"))
    operators = re.compile(conf["operators"])
    units: list[Unit] = []
    for name, spec in conf["package"].items():
        if args.package and name not in args.package:
            continue
        for module, names in spec["modules"].items():
            tests = spec.get("tests", {}).get(module)
            if not tests:
                raise SystemExit(f"safety.toml: no tests for {module}")
            units.append(Unit(name, module, names, tests, args.sessions, conf["operators"],
                              args.sample))
    args.sessions.mkdir(parents=True, exist_ok=True)
    scratch = args.sessions / "work-init"
    _copy_repo(scratch)
    for u in units:
        u.ensure(scratch, operators, args.sample)
        if args.rerun_survivors:
            n = u.rerun_survivors()
            if n:
                print(f"{u.key}: {n} survivors pending again", flush=True)
    if args.list:
        for u in units:
            selected, pending = u.counts()
            print(f"{u.key}: {selected} mutants ({pending} pending) on {len(u.names)} "
                  f"functions; tests {' '.join(u.tests)}")
        print(f"total: {sum(u.counts()[0] for u in units)} mutants")
        return 0
    if not args.report:
        deadline = time.monotonic() + (args.budget_min * 60 if args.budget_min else 1e9)
        # longest pending first, so the jobs end together
        todo: queue.Queue[Unit] = queue.Queue()
        for u in sorted(units, key=lambda u: -u.counts()[1]):
            todo.put(u)
        log: queue.Queue[str] = queue.Queue()
        errors: list[BaseException] = []

        def worker(slot: int) -> None:
            work = args.sessions / f"work-{slot}"
            _copy_repo(work)
            while True:
                try:
                    u = todo.get_nowait()
                except queue.Empty:
                    return
                try:
                    _execute(u, work, deadline, log)
                except BaseException as exc:  # reported below
                    errors.append(exc)
                    return

        threads = [threading.Thread(target=worker, args=(i,), daemon=True)
                   for i in range(max(1, args.jobs))]
        for t in threads:
            t.start()
        while any(t.is_alive() for t in threads):
            time.sleep(0.5)
            while not log.empty():
                print(log.get(), flush=True)
        while not log.empty():
            print(log.get(), flush=True)
        if errors:
            raise SystemExit(str(errors[0]))
    return _report(units, args)


def _report(units: list[Unit], args: argparse.Namespace) -> int:
    """Print and write the scores of the sessions as they stand."""
    eq = _equivalent()
    per: dict[str, dict] = {}
    for u in units:
        r = u.score(eq)
        p = per.setdefault(u.package, {"selected": 0, "pending": 0, "killed": 0,
                                       "survived": 0, "equivalent": 0, "incompetent": 0,
                                       "survivors": []})
        for k, v in r.items():
            p[k] += v
    print(f"{'package':8} {'killed/scored':>14} {'%':>6} {'equiv':>5} {'incomp':>6} "
          f"{'run/selected':>13}")
    for name, p in per.items():
        scored = p["killed"] + p["survived"]
        run = p["selected"] - p["pending"]
        p["score"] = round(p["killed"] / scored, 4) if scored else None
        pct = f"{100 * p['killed'] / scored:.1f}" if scored else "-"
        print(f"{name:8} {p['killed']:>6}/{scored:<7} {pct:>6} {p['equivalent']:>5} "
              f"{p['incompetent']:>6} {run:>6}/{p['selected']:<6}")
    k = sum(p["killed"] for p in per.values())
    s = sum(p["survived"] for p in per.values())
    sel = sum(p["selected"] for p in per.values())
    pend = sum(p["pending"] for p in per.values())
    score = k / (k + s) if k + s else 0.0
    full = pend == 0 and args.sample == 1
    met = full and score >= TARGET
    scope = "full run" if full else (
        f"partial: {sel - pend} of {sel} selected mutants run"
        + (f", sample 1/{args.sample}" if args.sample > 1 else ""))
    print(f"total: {k}/{k + s} killed ({100 * score:.1f}%), "
          f"{sum(p['equivalent'] for p in per.values())} equivalent; {scope}")
    print(f"target >= {100 * TARGET:.0f}% killed: "
          + ("MET" if met else ("not met" if full or score < TARGET
                                else "not yet shown (run incomplete)")))
    args.out.mkdir(parents=True, exist_ok=True)
    summary = {"sample": args.sample, "target": TARGET, "full": full, "met": met,
               "selected": sel, "pending": pend, "killed": k, "survived": s,
               "score": round(score, 4),
               "packages": {n: {f: v for f, v in p.items() if f != "survivors"}
                            for n, p in per.items()}}
    (args.out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n",
                                           encoding="utf-8")
    lines = ["# Surviving mutants of safety lines", ""]
    for name, p in per.items():
        for sv in p["survivors"]:
            lines += [f"## {name}: {sv['module']}:{sv['line']} {sv['function']} "
                      f"({sv['operator']})", "", "```diff", sv["diff"].strip(), "```", ""]
    (args.out / "survivors.md").write_text("\n".join(lines), encoding="utf-8")
    print(f"written: {args.out / 'summary.json'}, {args.out / 'survivors.md'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
