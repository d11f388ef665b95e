"""Run the bad-input sweep of issue 29 and classify every outcome.

OK: exit 0, 1 or 2 (3 where --fail-on is given), no traceback, an error message naming
the file, field or flag, no credential printed, every input byte-identical afterwards.
A defect otherwise: a traceback (cause: exception type and the innermost icore frame), an
``internal error`` line, another exit code, a hang (timeout), a message naming nothing,
a leaked credential, a changed input, an API call that accepts a wrong type.
"""

from __future__ import annotations

import argparse
import collections
import hashlib
import json
import os
import random
import re
import signal
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from . import (
    api_types,
    cli_cases,
    names_env,
    round4,
    round5,
    round6,
    round7,
    round8,
    round9,
    round10,
    surfaces,
)
from .cases import SECRET, Builder, Case

ROOT = Path(os.environ.get("ICORE_REPO") or Path(__file__).resolve().parents[2])
_FRAME = re.compile(r'File "([^"]+)", line (\d+), in (\S+)')


def _digest(p: Path) -> str | None:
    try:
        if p.is_symlink() or not p.is_file():
            return None
        return hashlib.sha256(p.read_bytes()).hexdigest()
    except OSError:
        return None


def _argv(c: Case) -> list[str]:
    if c.argv[0] == "ICORE":
        return [sys.executable, "-m", "icore", *c.argv[1:]]
    if c.argv[0] == "PY":
        return [sys.executable, "-c", *c.argv[1:]]
    return c.argv


def _traceback_cause(text: str) -> str:
    block = text[text.rfind("Traceback (most recent call last)"):]
    frames = _FRAME.findall(block)
    ours = [f for f in frames if "/icore/" in f[0] or "/icore_lab/" in f[0]]
    where = ours[-1] if ours else (frames[-1] if frames else ("?", "?", "?"))
    short = where[0].split("/src/")[-1]
    lines = [x for x in block.splitlines() if x and not x.startswith((" ", "Traceback"))]
    exc = lines[-1].split(":")[0] if lines else "?"
    return f"traceback {exc} at {short}:{where[1]} ({where[2]})"


def _internal_location(c: Case) -> str:
    """Where an ``internal error`` comes from: the file audited in process."""
    if not c.inputs:
        return "?"
    code = ("import sys\nfrom icore.adapters import audit_file\n"
            f"audit_file({str(c.inputs[0])!r})\n")
    try:
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           timeout=120, errors="replace")
    except subprocess.TimeoutExpired:
        return "?"
    return _traceback_cause(r.stderr) if "Traceback" in r.stderr else "?"


def _abs_pythonpath() -> str:
    """PYTHONPATH with every entry absolute (default: the checkout's ``src``).

    Each case runs in its own temporary folder: a relative ``PYTHONPATH=src`` would name
    nothing there, and the cases would silently import the icore installed in the venv
    (another checkout) instead of the one under test.
    """
    parts = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    return os.pathsep.join(str(Path(p).resolve()) for p in parts or [str(ROOT / "src")])


def run_case(c: Case, work: Path) -> dict[str, Any]:
    """Run one case in a subprocess (its own session, killed on timeout) and classify."""
    before = {str(p): _digest(p) for p in c.inputs}
    cwd = Path(tempfile.mkdtemp(dir=work, prefix="cwd"))
    env = {**os.environ, "COLUMNS": "200", "ICORE_PY": sys.executable,
           "ICORE_LLM_BASE_URL": "", "ICORE_LLM_MODEL": "", "OPENAI_BASE_URL": "",
           "PYTHONPATH": _abs_pythonpath()}
    t0 = time.monotonic()
    proc = subprocess.Popen(_argv(c), cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            start_new_session=True)
    try:
        raw, _ = proc.communicate(timeout=c.timeout)
        rc: int | None = proc.returncode
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        raw, _ = proc.communicate()
        rc = None
    secs = time.monotonic() - t0
    out = raw.decode("utf-8", "replace")
    after = {str(p): _digest(p) for p in c.inputs}
    verdict, cause = classify(c, rc, out, before, after)
    if cause.startswith("internal error"):
        cause += " " + _internal_location(c)
    return {"id": c.id, "family": c.family, "verdict": verdict, "cause": cause, "rc": rc,
            "secs": round(secs, 2), "argv": c.argv[:8] if c.argv[0] != "PY" else c.id,
            "tail": out[-1500:]}


def classify(c: Case, rc: int | None, out: str, before: dict[str, str | None],
             after: dict[str, str | None]) -> tuple[str, str]:
    """``("ok" | "defect" | "soft", cause)`` of one outcome (see the module docstring)."""
    if rc is None:
        return "defect", f"hang ({c.family}: {' '.join(c.argv[1:3])[:60]})"
    if "Traceback (most recent call last)" in out:
        return "defect", _traceback_cause(out)
    m = re.search(r"internal error (\w+)", out)
    if m:
        return "defect", f"internal error {m.group(1)}"
    if rc not in c.ok_codes:
        return "defect", f"exit code {rc} ({c.family})"
    changed = [Path(p).name for p, h in before.items() if h is not None and after[p] != h]
    if changed:
        return "defect", f"input changed or destroyed ({c.family})"
    if SECRET in out:
        return "defect", "credential printed"
    if c.refusal and "ACCEPTED" in out:
        return "defect", "API accepted a wrong type"
    if rc in (1, 2) and c.names and not any(n in out for n in c.names):
        return "defect", f"message names no file/field/flag ({c.family})"
    for f in c.fields:
        if f.startswith("json:"):
            js = c.argv[c.argv.index("--json") + 1]
            text = Path(js).read_text() if Path(js).is_file() else ""
            if f[5:] not in text:
                return "defect", "skip warning missing from --json"
    if rc == 1 and c.family == "importer-field" and c.fields and \
            not any(f in out for f in c.fields):
        return "soft", "the damaged field is not named (review)"
    return "ok", ""


def _seed_exports(work: Path) -> tuple[Path, Path]:
    """A live run's export and an audit's export, made by icore itself."""
    env = {**os.environ, "COLUMNS": "200"}
    live, audit = work / "seed-live.otlp.jsonl", work / "seed-audit.otlp.jsonl"
    subprocess.run([sys.executable, "-m", "icore", "run", "--out", str(work / "seed-run"),
                    "--otlp-endpoint", f"file:{live}"], check=True, env=env,
                   capture_output=True, timeout=300)
    t = work / "seed.jsonl"
    from . import seeds
    from .cases import dumps
    t.write_text("\n".join(dumps(x) for x in seeds.jsonl_rows()) + "\n")
    subprocess.run([sys.executable, "-m", "icore", "audit", str(t), "--no-report",
                    "--otlp-endpoint", f"file:{audit}"], check=True, env=env,
                   capture_output=True, timeout=300)
    return live, audit


def build(work: Path, seed: int, per_format: int, per_manifest: int) -> list[Case]:
    """Write every input under ``work`` and return the cases."""
    sys.set_int_max_str_digits(0)  # the generator writes 5000-digit ints; icore runs keep the limit
    live, audit = _seed_exports(work)
    b = Builder(work / "cases", random.Random(seed), live, audit, per_format)
    b.importer_fields()
    b.importer_encodings()
    b.structure()
    b.filesystem()
    cli_cases.cli_flags(b)
    cli_cases.manifests(b, per_manifest)
    cli_cases.api(b)
    surfaces.all_families(b)
    api_types.api_types(b)
    names_env.all_families(b)
    round4.all_families(b)
    round5.all_families(b, work)
    round6.all_families(b, work)
    round7.all_families(b, work)
    round8.all_families(b, work)
    round9.all_families(b, work)
    round10.all_families(b, work)
    return b.cases


def main(argv: list[str] | None = None) -> int:
    """Build, run (``--jobs`` at once), print the counts; 1 when a defect was found."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--work", type=Path, default=None, help="work folder (default: a temp one)")
    ap.add_argument("--seed", type=int, default=0, help="sampling seed of the damaged fields")
    ap.add_argument("--per-format", type=int, default=20)
    ap.add_argument("--per-manifest", type=int, default=15)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--only", default="", help="run only case ids starting with one of "
                    "these comma-separated prefixes (e.g. gateway/,http/,ws/,rec/,conc/,apitype/,"
                    "names/,env/,gwstart/,odd/,envo/,bench2/,rnames/,apimore/; round 5: "
                    "wrap/,gwup/,gwflags/,recedit/,outp/,recval/; round 6: "
                    "fargs/,approv/,recrep/,clic/,gwman/,conc6/; round 7: "
                    "sdkst/,truthy/,bignum/,tgraph/,ybomb/,mcpargs/; round 8: "
                    "dgst/,aopt/,gwask/,elicit/,mfmt/,seam8/; round 9: fence9/,store9/,"
                    "gwstore9/,chain9/; round 10: att10/,own10/,tcp10/,claims10/,aud10/)")
    ap.add_argument("--json", type=Path, default=None, help="write every result here")
    ap.add_argument("--inproc", type=int, default=0, metavar="N",
                    help="instead: N sampled (path, value) mutations per importer, "
                    "audited in this process (thousands in minutes)")
    ap.add_argument("--recheck", type=Path, default=None,
                    help="run only the cases that were not ok in this earlier --json")
    a = ap.parse_args(argv)
    work = a.work or Path(tempfile.mkdtemp(prefix="icore-sweep-"))
    work.mkdir(parents=True, exist_ok=True)
    if a.inproc:
        from . import inproc
        live, audit = _seed_exports(work)
        b = Builder(work / "cases", random.Random(a.seed), live, audit, a.per_format)
        res = inproc.run(b, random.Random(a.seed), a.inproc)
        inproc.report(res)
        if a.json:
            a.json.write_text(json.dumps(res, indent=1))
        return 1 if res["defects"] else 0
    prefixes = tuple(a.only.split(",")) if a.only else ("",)
    cases = [c for c in build(work, a.seed, a.per_format, a.per_manifest)
             if c.id.startswith(prefixes)]
    if a.recheck:
        again = {r["id"] for r in json.loads(a.recheck.read_text()) if r["verdict"] != "ok"}
        cases = [c for c in cases if c.id in again]
    print(f"{len(cases)} bad inputs under {work}", flush=True)
    t0 = time.monotonic()
    results = []
    with ThreadPoolExecutor(a.jobs) as ex:
        for r in ex.map(lambda c: run_case(c, work), cases):
            results.append(r)
            if r["verdict"] != "ok":
                print(f"{r['verdict']:6} {r['id']}: {r['cause']}", flush=True)
    report(results, time.monotonic() - t0)
    if a.json:
        a.json.write_text(json.dumps(results, indent=1))
    return 1 if any(r["verdict"] == "defect" for r in results) else 0


def report(results: list[dict[str, Any]], secs: float) -> None:
    """Counts per family, then the defects grouped by cause, most frequent first."""
    fams: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    causes: dict[str, list[str]] = collections.defaultdict(list)
    for r in results:
        fams[r["family"]][r["verdict"]] += 1
        if r["verdict"] != "ok":
            causes[f"[{r['verdict']}] {r['cause']}"].append(r["id"])
    tot = collections.Counter(r["verdict"] for r in results)
    print(f"\n{len(results)} inputs in {secs:.0f} s: ok {tot['ok']}, defect {tot['defect']}, "
          f"soft {tot['soft']}")
    for f, cnt in sorted(fams.items()):
        print(f"  {f:16} {sum(cnt.values()):4}  ok {cnt['ok']:4}  defect {cnt['defect']:3}  "
              f"soft {cnt['soft']:3}")
    print(f"\n{len(causes)} causes:")
    for cause, ids in sorted(causes.items(), key=lambda kv: -len(kv[1])):
        print(f"  {len(ids):3}  {cause}\n       e.g. {', '.join(ids[:4])}")
