r"""Bad inputs of the surfaces that changed after round 7 (issue 29, round 8).

Families, each generated from the sweep's seed (sampled where the product is large):

- ``digest``: a recorded run (a stale call refused, a human's rejection, a replan that
  ran; every decision, human-answer and ran line carrying its ``digest``) edited as a
  file: a field of any line given another value (flipped, ``NaN``/``1e400`` tokens, 5000
  digits, lone surrogates, 1 MB strings, NFD, dropped), a digest dropped, swapped, of
  the wrong type or case, lines deleted, duplicated, moved, the file truncated, old
  (digest-less) and new lines mixed, and honest re-serializations (key order, spacing,
  ``\\u`` escapes, CRLF). ``icore audit --fail-on invalid`` must never report a changed
  verdict (a refused call valid, a rejection approved) with exit 0; an honest
  re-serialization must audit as the original did.
- ``audit-opts``: ``--fail-on`` values (case, spacing, separators, look-alike letters,
  control characters, every condition at once) and ``--max-input-mb`` values against
  that trace and an edited one: exit 2 naming the option, or the verdict.

The gateway and framework families are in :mod:`round8_mcp` and :mod:`round8_seams`.
"""

from __future__ import annotations

import copy
import itertools
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from .cases import Builder, Case, _Raw, dumps

_REPO = Path(__file__).resolve().parents[2]

_BASE = """
import sys
sys.path.insert(0, REPO)
from pathlib import Path
from tests.adapters.test_line_digest import _recorded
_recorded(Path(OUT))
"""


def base_trace(work: Path) -> tuple[Path, dict[str, Any]] | None:
    """The recorded run every ``digest`` case edits, and its honest audit's verdicts."""
    d = work / "round8-base"
    d.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "PYTHONPATH": os.environ.get("PYTHONPATH", str(_REPO / "src"))}
    subprocess.run([sys.executable, "-c", f"REPO = {str(_REPO)!r}\nOUT = {str(d)!r}\n" + _BASE],
                   check=True, env=env, capture_output=True, timeout=300)
    p = d / "r.jsonl"
    js = d / "honest.json"
    r = subprocess.run([sys.executable, "-m", "icore", "audit", str(p), "--no-report", "--json",
                        str(js), "--fail-on", "invalid"], env=env, capture_output=True,
                       timeout=300)
    if r.returncode != 0:
        return None
    return p, _verdicts(json.loads(js.read_text()))


def _verdicts(doc: dict[str, Any]) -> dict[str, Any]:
    runs = doc.get("runs") or []
    if not runs:
        return {}
    return {lv.get("action"): [lv.get("status"), lv.get("human")]
            for lv in runs[0].get("lineage") or ()}


_CHECK = r"""
import json, subprocess, sys, os
P, JS, HONEST, MODE = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), sys.argv[4]
BENIGN = MODE == "1"  # "2": undetectable by design (no digest anywhere): no verdict check
r = subprocess.run([sys.executable, "-m", "icore", "audit", P, "--no-report", "--json", JS,
                    "--fail-on", "invalid"], capture_output=True, text=True, errors="replace",
                   timeout=240)
print(r.stdout[-2500:]); print(r.stderr[-2500:])
if r.returncode == 0 and MODE != "2":
    doc = json.load(open(JS))
    runs = doc.get("runs") or []
    got = {lv.get("action"): [lv.get("status"), lv.get("human")]
           for lv in (runs[0].get("lineage") or ())} if runs else {}
    if BENIGN and got != HONEST:
        print("ACCEPTED an honest re-serialization changed the verdicts:", got); sys.exit(0)
    worse = [a for a, (st, hu) in got.items()
             if (st in ("valid", "authorized") and HONEST.get(a, [None])[0] not in
                 ("valid", "authorized"))
             or (hu == "approved" and (HONEST.get(a) or [None, None])[1] != "approved")]
    if worse:
        print("ACCEPTED an edit made these look safe with exit 0:", worse, got); sys.exit(0)
if BENIGN and r.returncode != 0:
    print("WRONG an honest re-serialization audits with exit", r.returncode)
    sys.exit(4)
sys.exit(r.returncode)
"""


def _leaves(x: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    if isinstance(x, dict):
        out = [path] if path else []
        for k, v in x.items():
            out += _leaves(v, (*path, k))
        return out
    if isinstance(x, list):
        out = [path]
        for i, v in enumerate(x):
            out += _leaves(v, (*path, i))
        return out
    return [path]


_VALUES: dict[str, Any] = {
    "flip": "FLIP", "drop": "DROP", "null": None, "true": True, "false": False, "zero": 0,
    "authorized": "authorized", "approve": "approve", "approved": "approved",
    "valid": "valid", "empty": "", "list": [], "obj": {}, "nan": _Raw("NaN"),
    "1e400": _Raw("1e400"), "5000-digits": _Raw("1" + "0" * 5000),
    "surrogate": _Raw('"\\ud800"'), "1MB": "x" * (1 << 20), "nfd": "NFD",
    "upper": "UPPER", "neg-zero": _Raw("-0.0"), "big": 2**64,
}


def _set(doc: Any, path: tuple[Any, ...], how: str) -> bool:
    node = doc
    for k in path[:-1]:
        node = node[k]
    k = path[-1]
    old = node[k]
    v = _VALUES[how]
    if isinstance(v, str) and v == "DROP":
        if not isinstance(node, dict):
            return False
        del node[k]
        return True
    if isinstance(v, str) and v == "FLIP":
        if isinstance(old, bool):
            v = not old
        elif isinstance(old, (int, float)):
            v = old + 1
        elif isinstance(old, str) and old:
            v = old[::-1] if old != old[::-1] else old + "x"
        else:
            return False
    elif isinstance(v, str) and v == "NFD":
        if not isinstance(old, str) or not old:
            return False
        v = old[0] + "\u0301" + old[1:]
    elif isinstance(v, str) and v == "UPPER":
        if not isinstance(old, str) or old.upper() == old:
            return False
        v = old.upper()
    node[k] = v
    return True


def _dump(line: Any) -> str:
    return dumps(line)


def _edits(lines: list[Any], rng: Any, n_fields: int) -> dict[str, tuple[str, bool | None]]:
    """Name -> (file text, kind): an honest re-serialization (True), an edit (False).

    None: a forgery no check can see (every digest gone: read as recorded by design).
    """
    out: dict[str, tuple[str, bool | None]] = {}
    n = len(lines)
    body = list(range(1, n))
    # a field of a line given another value (sampled: line x leaf x value)
    combos = [(i, p, v) for i in body for p in _leaves(lines[i]) for v in _VALUES
              if p and p[-1] != "at_ms"]
    for i, path, how in rng.sample(combos, min(n_fields, len(combos))):
        doc = copy.deepcopy(lines)
        if not _set(doc[i], path, how):
            continue
        name = f"field/l{i}/{'.'.join(map(str, path))[:60]}={how}"
        out[name] = ("".join(_dump(x) + "\n" for x in doc), False)
    digested = [i for i in body if "digest" in json.dumps(lines[i])]
    for i in digested:
        for how in ("drop", "null", "upper", "list", "zero", "1MB", "surrogate"):
            doc = copy.deepcopy(lines)
            node = doc[i]
            path = ("planfence", "decision", "digest") if "planfence" in node else ("digest",)
            if _set(node, path, how):
                out[f"digest/l{i}={how}"] = ("".join(_dump(x) + "\n" for x in doc), False)
    for i, j in itertools.pairwise(digested):
        doc = copy.deepcopy(lines)
        a = doc[i]["planfence"]["decision"] if "planfence" in doc[i] else doc[i]
        c = doc[j]["planfence"]["decision"] if "planfence" in doc[j] else doc[j]
        a["digest"], c["digest"] = c["digest"], a["digest"]
        out[f"digest/swap-l{i}-l{j}"] = ("".join(_dump(x) + "\n" for x in doc), False)
    # whole lines deleted, duplicated, moved; the file truncated
    for i in body:
        out[f"line/delete-l{i}"] = ("".join(_dump(x) + "\n" for k, x in enumerate(lines)
                                            if k != i), False)
        out[f"line/dup-l{i}"] = ("".join(_dump(x) + "\n" + (_dump(x) + "\n" if k == i else "")
                                         for k, x in enumerate(lines)), False)
        moved = [x for k, x in enumerate(lines) if k != i]
        out[f"line/to-end-l{i}"] = ("".join(_dump(x) + "\n" for x in [*moved, lines[i]]),
                                    False)
        out[f"line/to-start-l{i}"] = ("".join(_dump(x) + "\n" for x in
                                              [lines[0], lines[i], *moved[1:]]), False)
    text = "".join(_dump(x) + "\n" for x in lines)
    for frac in (0.3, 0.5, 0.8, 0.95, 0.999):
        out[f"truncate/{frac}"] = (text[:int(len(text) * frac)], False)
    out["order/reversed-events"] = ("".join(_dump(x) + "\n" for x in
                                            [lines[0], *reversed(lines[1:])]), False)

    # old (no digest) and new lines mixed; an old line has no chain link either (a
    # chain link is over its line's digest: a digest dropped beside its link is an edit)
    def strip(x: Any) -> Any:
        y = copy.deepcopy(x)
        if isinstance(y, dict):
            y.pop("digest", None)
            y.pop("chain", None)
            y.pop("chain_end", None)
            y.get("planfence", {}).get("decision", {}).pop("digest", None)
        return y
    old = [strip(x) for x in lines]

    def before(x: Any) -> Any:  # as written before #29: no marker, digest or chain
        y = strip(x)
        if isinstance(y, dict):
            y.pop("chain", None)
            y.pop("chain_end", None)
            if isinstance(y.get("run"), dict):
                y["run"].pop("icore", None)
        return y
    out["mix/all-old"] = ("".join(_dump(before(x)) + "\n" for x in lines), True)
    out["mix/old-decisions-new-events"] = ("".join(
        _dump(strip(x) if "planfence" in x else x) + "\n" for x in lines), False)
    out["mix/new-decisions-old-events"] = ("".join(
        _dump(x if "planfence" in x else strip(x)) + "\n" for x in lines), False)
    out["mix/old-then-new"] = ("".join(_dump(x) + "\n" for x in [*old, *lines[1:]]), False)
    out["mix/new-then-old"] = ("".join(_dump(x) + "\n" for x in [*lines, *old[1:]]), False)
    for i in digested:  # a forged line written as an old one (no digest) among new ones
        doc = copy.deepcopy(lines)
        x = doc[i]
        if "planfence" in x:
            x["planfence"]["decision"]["outcome"] = "authorized"
            x["planfence"]["decision"]["reason"] = "valid"
        elif x.get("answered_by"):
            x["decision"] = "approve"
        else:
            x["ran"] = True
            x.pop("blocked", None)
        out[f"mix/forged-undigested-l{i}"] = ("".join(_dump(strip(y) if k == i else y) + "\n"
                                                      for k, y in enumerate(doc)), False)
        out[f"mix/forged-all-undigested-l{i}"] = ("".join(
            _dump(strip(y)) + "\n" for y in doc), None)
    # one kind of line forged and every digest of that kind dropped, the other kind's kept
    dec = copy.deepcopy(lines)
    for x in dec:
        d = x.get("planfence", {}).get("decision") if isinstance(x, dict) else None
        if isinstance(d, dict):
            d.pop("digest", None)
            if d.get("outcome") != "authorized":  # the refusal made a valid-looking pass
                d.update(outcome="authorized", reason="valid", heads=dict(d.get("frontier")
                                                                          or {}),
                         fresh={}, detail="")
    out["mix/forged-decisions-undigested"] = ("".join(_dump(x) + "\n" for x in dec), False)
    ev = copy.deepcopy(lines)
    for x in ev:
        if isinstance(x, dict) and "agent" in x:
            x.pop("digest", None)
            if x.get("answered_by") == "human":
                x["decision"] = "approve"
    # None: read as recorded by design (a writer may digest its decisions alone, through
    # the public DecisionEntry.to_dict(digest=True)); only crashes and exit codes count
    out["mix/forged-events-undigested"] = ("".join(_dump(x) + "\n" for x in ev), None)
    # honest re-serializations: the same lines written another way
    out["honest/sorted-keys"] = ("".join(json.dumps(x, sort_keys=True) + "\n" for x in lines),
                                 True)
    out["honest/reversed-keys"] = ("".join(json.dumps(_rev(x)) + "\n" for x in lines), True)
    out["honest/indent-spaces"] = ("".join(json.dumps(x, separators=(" , ", " : ")) + "\n"
                                           for x in lines), True)
    out["honest/ascii-escapes"] = ("".join(json.dumps(x, ensure_ascii=True) + "\n"
                                           for x in lines), True)
    out["honest/crlf"] = ("".join(json.dumps(x) + "\r\n" for x in lines), True)
    out["honest/blank-lines"] = ("".join(json.dumps(x) + "\n\n" for x in lines), True)
    out["honest/no-final-newline"] = ("\n".join(json.dumps(x) for x in lines), True)
    out["honest/floats-as-ints"] = ("".join(json.dumps(_intfloats(x)) + "\n" for x in lines),
                                    True)
    return out


def _rev(x: Any) -> Any:
    if isinstance(x, dict):
        return {k: _rev(x[k]) for k in reversed(list(x))}
    if isinstance(x, list):
        return [_rev(v) for v in x]
    return x


def _intfloats(x: Any) -> Any:
    """Integer-valued floats written as ints (``1.0`` as ``1``: JavaScript's JSON)."""
    if isinstance(x, dict):
        return {k: _intfloats(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_intfloats(v) for v in x]
    if isinstance(x, float) and x.is_integer():
        return int(x)
    return x


_MODE = {None: "2", True: "1", False: "0"}


def digest(b: Builder, work: Path, per_seed: int = 40) -> None:
    """The recorded run's lines edited (fields, digests, whole lines, old and new mixed)."""
    base = base_trace(work)
    if base is None:
        raise RuntimeError("round 8: the honest base trace does not audit clean")
    p0, honest = base
    lines = [json.loads(x) for x in p0.read_text(encoding="utf-8").splitlines() if x.strip()]
    edits = _edits(lines, b.rng, n_fields=per_seed)
    extra = [k for k in edits if not k.startswith("field/")]
    picked = [k for k in edits if k.startswith("field/")] + sorted(
        b.rng.sample(extra, min(per_seed, len(extra))))
    picked += [k for k in edits if k.startswith(("honest/", "mix/")) and k not in picked]
    drv = work / "round8-check.py"
    drv.write_text(_CHECK)
    for name in sorted(set(picked)):
        text, benign = edits[name]
        b.cases.append(check_case(b, f"dgst/{name}", "digest", drv, text, honest,
                                  _MODE[benign], (0,) if benign else (0, 1, 2, 3)))


def check_case(b: Builder, cid: str, family: str, drv: Path, text: str,
               honest: dict[str, Any], mode: str, ok_codes: tuple[int, ...]) -> Case:
    """One edited trace ``text`` audited by the check driver ``drv`` (see ``_CHECK``)."""
    d = b._dir(cid)
    p = d / "run.jsonl"
    p.write_text(text, encoding="utf-8", errors="surrogatepass")
    return Case(cid, family, ["PY", f"import runpy, sys; sys.argv = ["
                              f"{str(drv)!r}, {str(p)!r}, "
                              f"{str(d / 's.json')!r}, {json.dumps(honest)!r}, "
                              f"{mode!r}]; runpy.run_path("
                              f"{str(drv)!r}, run_name='__main__')"],
                inputs=[p], names=[p.name], timeout=300, refusal=True, ok_codes=ok_codes)


# ------------------------------------------------------------------------- audit-opts
_FAIL_ON = [
    "invalid", "INVALID", "Invalid", " invalid", "invalid ", "invalid,", ",invalid",
    "invalid,,unknown", "invalid;unknown", "invalid unknown", "invalid|unknown",
    "invalid,unknown,hard-flags,unsound,not-ended", "all", "*", "none", "",
    "\u0456nvalid", "invalid\u200b", "inval\x01id", "invalid\n", "hard_flags",
    "not_ended", "notended", "x" * 10_000, "-1", "3", "--json", "invalid=1",
    "\udcff", "i", "unknown", "not-ended", "unsound", "hard-flags",
]
_MAX_MB = ["0", "-1", "nan", "inf", "1e-9", "1e400", "0x10", "1_000", "", " 5", "5MB",
           "\u0665"]


def audit_opts(b: Builder, per_seed: int = 16) -> None:
    """``--fail-on`` and ``--max-input-mb`` values on the honest and a forged trace."""
    base = b.root / ".." / "round8-base" / "r.jsonl"
    src = base.resolve()
    combos = [("fail-on", v, t) for v in _FAIL_ON for t in ("honest", "forged")] + \
             [("max-mb", v, "honest") for v in _MAX_MB]
    for opt, v, t in sorted(b.rng.sample(combos, min(per_seed, len(combos)))):
        cid = f"aopt/{opt}/{ascii(v)[1:-1][:40]}/{t}"
        d = b._dir(cid)
        p = d / "run.jsonl"
        text = src.read_text(encoding="utf-8")
        if t == "forged":
            text = text.replace('"outcome": "replan_required"', '"outcome": "authorized"', 1)
        p.write_text(text, encoding="utf-8")
        flag = ["--fail-on", v] if opt == "fail-on" else ["--fail-on", "invalid",
                                                            "--max-input-mb", v]
        # exit 2 naming the option, or the verdict (3 for the forged trace's INVALID)
        b.cases.append(Case(cid, "audit-opts", ["ICORE", "audit", str(p), "--no-report",
                                                "--json", str(d / "s.json"), *flag],
                            inputs=[p], names=["--fail-on", "--max-input-mb", p.name],
                            timeout=120, ok_codes=(0, 1, 2, 3)))


def all_families(b: Builder, work: Path) -> None:
    """Every family of this module and of :mod:`round8_mcp` / :mod:`round8_seams`."""
    from . import round8_mcp, round8_seams
    digest(b, work)
    audit_opts(b)
    round8_mcp.all_families(b, work)
    round8_seams.seam_args(b)


__all__ = ["all_families"]
