r"""Bad inputs of this round's surfaces (issue 29, round 9), sampled with the sweep's seed.

- ``fence-api`` (``fence9/``): the high-level fencing API through the LangGraph, Agents
  SDK, AG2 and CrewAI seams (CrewAI in its own venv): ``writes=`` given keys, patterns,
  empty keys, unowned keys, or a function returning a str, raising, returning no str;
  tool bodies that raise :class:`~icore.integrations.NoEffect` (an empty, a 1 MB, a
  lone-surrogate message, a ``__str__`` that raises), another exception, that commit
  with ``expected=`` the gate's basis after another writer moved the head (``HeadConflict``
  turned into ``NoEffect``), or return values with no JSON form; fresh and stale. A stale
  call must not run, a tool that raised anything but ``NoEffect`` after it started must
  never audit as a known outcome, the recording must be strict JSON and audit.
- ``store-damage`` (``store9/``): a SQLite workspace folder with committed facts, then
  damaged (random bytes at a sampled offset, a cut file, an empty file, a garbage WAL, a
  folder in its place), made read-only (file or folder; root's DAC override dropped with
  ``setpriv``), or written under a small ``RLIMIT_FSIZE`` (a full disk). Opening,
  reading, writing, a protected call and an ``update`` must end in an answer or an
  :class:`~icore.errors.IcoreError`; with no damage to the file, every fact committed
  before (and every write the run reported done) must still read back afterwards.
- ``gw-store`` (``gwstore9/``): the same damages under a real stdio ``icore mcp`` gateway
  (``prlimit --fsize`` for a full disk): the client gets answers, the gateway exits 0, 1
  or 2 without a traceback, and an ``error:`` line names the file it is about.
- ``chain-edit`` (``chain9/``): a recorded run's ``chain`` / ``chain_end`` fields given
  odd values, two writers given one id, the file cut, a line of binary garbage or of
  50 MB inserted: ``icore audit --fail-on invalid`` must never exit 0 with a verdict
  made safer (the round-8 check).
"""

from __future__ import annotations

import copy
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from . import round5, round8, round8_seams
from .cases import Builder, Case

_REPO = Path(__file__).resolve().parents[2]
_CREW_PY = Path("/work/main/.venv-crewai/bin/python")
NOCAP = ["setpriv", "--bounding-set", "-dac_override,-dac_read_search", "--inh-caps",
         "-dac_override,-dac_read_search"]
"""Run a child as root without the permission override (read-only files bite)."""

# ---------------------------------------------------------------------------- fence-api
_BODIES: dict[str, str] = {
    "ok": "def T(x: int) -> str:\n    'Ship.'\n    SEEN.append(x)\n    return 'done'\n",
    "noeffect": "def T(x: int) -> str:\n    'Ship.'\n    SEEN.append(x)\n"
                "    raise NoEffect('card declined')\n",
    "noeffect-empty": "def T(x: int) -> str:\n    'Ship.'\n    SEEN.append(x)\n"
                      "    raise NoEffect()\n",
    "noeffect-1MB": "def T(x: int) -> str:\n    'Ship.'\n    SEEN.append(x)\n"
                    "    raise NoEffect('x' * (1 << 20))\n",
    "noeffect-surrogate": "def T(x: int) -> str:\n    'Ship.'\n    SEEN.append(x)\n"
                          "    raise NoEffect('bad \\ud800 text \\x00')\n",
    "noeffect-badstr": "class E(NoEffect):\n    def __str__(self):\n"
                       "        raise RuntimeError('str boom')\n"
                       "def T(x: int) -> str:\n    'Ship.'\n    SEEN.append(x)\n"
                       "    raise E('z')\n",
    "raise-other": "def T(x: int) -> str:\n    'Ship.'\n    SEEN.append(x)\n"
                   "    raise ConnectionError('reset after the booking')\n",
    "raise-badstr": "class E(Exception):\n    def __str__(self):\n"
                    "        raise RuntimeError('str boom')\n"
                    "def T(x: int) -> str:\n    'Ship.'\n    SEEN.append(x)\n"
                    "    raise E('z')\n",
    "expected-conflict": "def T(x: int) -> str:\n    'Ship.'\n    SEEN.append(x)\n"
                         "    seen = running_call().basis['k/1']\n"
                         "    ws.put('k/1', 77)  # another writer, meanwhile\n"
                         "    try:\n        ws.commit('k/1', x, expected=seen.id)\n"
                         "    except HeadConflict as exc:\n"
                         "        raise NoEffect('taken meanwhile') from exc\n"
                         "    return 'done'\n",
    "expected-bad": "def T(x: int) -> str:\n    'Ship.'\n    SEEN.append(x)\n"
                    "    ws.commit('k/1', x, expected=EXPECTED)\n    return 'done'\n",
    "returns-odd": "def T(x: int):\n    'Ship.'\n    SEEN.append(x)\n"
                   "    return {'v': float('nan'), 'b': b'\\xff', 'd': datetime.date(2026, 1, 1),"
                   " 'big': 10 ** 30, 's': '\\ud800'}\n",
}
_EXPECTED = ["None", "'x'", "5", "b'ab'", "float('nan')", "'0' * 64", "[1]", "'\\ud800'"]
_WRITES = ["None", "{'k/1'}", "{'k/2'}", "{'k/*'}", "{''}", "{'zz/1'}", "['k/1', 'k/1']",
           "lambda a: {'k/1'}", "lambda a: 'k/1'", "lambda a: 1 / 0", "lambda a: {1}",
           "lambda a: None", "lambda a: {'k/*'}", "lambda a: {'k/' + str(a['x'])}",
           "lambda a: {'\\ud800'}", "lambda a: a['nope']"]
_GUARDS_NOTHING = ("{'k/*'}", "{''}", "{'zz/1'}")
"""Static ``writes=`` a wrapper must refuse: a pattern, an empty key, an unowned key."""
_ARGS = ['{"x": 1}', '{"x": 0}', '{"x": -1}', '{"x": 1e400}', '{"x": NaN}', '{"x": "1"}',
         '{"x": ' + "9" * 5000 + '}', '{}', '{"x": 1, "zz": 2}', '{"x": null}']

_FENCE_TAIL = """
import re
if STALE and SEEN:
    print('ACCEPTED a stale call ran:', repr(SEEN)[:200]); sys.exit(0)
if SEEN and BODY in ('raise-other', 'raise-badstr'):
    line = re.search(r'protected actions of seam: .*', OUTTEXT)
    if line and 'outcome unknown' not in line.group(0):
        print('ACCEPTED a tool that raised after it started audits a known outcome:',
              line.group(0)); sys.exit(0)
"""


_OURS = """
def said(exc):
    try:
        return str(exc)[:300].encode('utf-8', 'backslashreplace').decode()
    except Exception:
        return '<str() raised>'
def ours(exc):
    # icore's frame raised it, or called the tool exception's own __str__ / __repr__
    tb = traceback.extract_tb(exc.__traceback__)
    if tb and '/icore/' in tb[-1].filename:
        return True
    return len(tb) > 1 and '/icore/' in tb[-2].filename and tb[-1].name in (
        '__str__', '__repr__')
"""


def _fence_src(fw: str, body: str, writes: str, text: str, stale: bool, expected: str
               ) -> str:
    """One fence-api case: round 8's seam driver with ``writes=`` and the body's kind."""
    tail = round8_seams._TAIL.replace(
        "depends_on={'k/1'})", f"depends_on={{'k/1'}}, writes={writes})")
    # the driver's own prints never call a tool exception's __str__ (the bodies' may
    # raise) nor quote an AG2 error event's traceback text as if it were a crash
    tail = tail.replace("print('FRAMEWORK-REFUSED', type(e).__name__, str(e)[:300])",
                        "print('FRAMEWORK-REFUSED', type(e).__name__, said(e))")
    wrapped = "        print('TYPED', type(e).__name__, str(e)[:300]); sys.exit(1)\n"
    assert wrapped in tail
    tail = tail.replace(wrapped, wrapped + (
        "    print('ACCEPTED a writes key that names no fact (its claim guards nothing)');"
        " sys.exit(0)\n" if writes in _GUARDS_NOTHING else ""), 1)
    tail = tail.replace("print('ANSWER', ascii(dispatch(W)[:300]))",
                        "print('ANSWER', ascii(dispatch(W)[:300]).replace('Traceback', "
                        "'Trace-back'))")
    # the audit's console summary is kept for the outcome check after it
    tail = tail.replace("print('AUDIT', a.returncode, a.stdout[-600:], a.stderr[-1500:])",
                        "print('AUDIT', a.returncode, a.stdout[-600:], a.stderr[-1500:])\n"
                        "OUTTEXT = a.stdout\n" + _FENCE_TAIL)
    return (f"REPO = {str(_REPO)!r}\n" + round8_seams._HEAD + _OURS
            + "from icore.integrations import NoEffect\nfrom icore.workspace import "
              "running_call\nfrom icore.errors import HeadConflict\n"
            + f"EXPECTED = {expected}\nBODY = {body!r}\n" + _BODIES[body]
            + round8_seams._WRAP[fw] + round8_seams._FW[fw]
            + f"TEXT = {text!r}\nSTALE = {stale}\n" + tail)


def fence_api(b: Builder, per_seed: int = 40) -> None:
    """Frameworks x bodies x ``writes=`` x model arguments, fresh and stale (sampled)."""
    fws = [fw for fw in round8_seams._FW if fw != "crew" or _CREW_PY.is_file()]
    combos = [(fw, body, w, t, st) for fw in fws for body in _BODIES for w in _WRITES
              for t in _ARGS for st in (False, True)]
    for fw, body, w, t, st in sorted(b.rng.sample(combos, min(per_seed, len(combos)))):
        exp = b.rng.choice(_EXPECTED)
        cid = (f"fence9/{fw}/{body}/w={ascii(w)[1:-1][:28]}/a={ascii(t)[1:-1][:16]}/"
               f"{'stale' if st else 'fresh'}")
        b._dir(cid)
        src = _fence_src(fw, body, w, t, st, exp)
        argv = ["PY", src] if fw != "crew" else [str(_CREW_PY), "-c", src]
        b.cases.append(Case(cid, "fence-api", argv, names=[], timeout=240, ok_codes=(0, 1),
                            refusal=True))


# ------------------------------------------------------------------------- store-damage
_SEED_STORE = """
import sys
from icore.workspace import Workspace
ws = Workspace.sqlite({'k/*': 'o'}, sys.argv[1])
for i in range(60):
    ws.put(f'k/{i}', {'v': i, 'pad': 'p' * 300})
"""

_STORE_RUN = r"""
import json, sys, os, resource, traceback
d, fsize, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
if fsize:
    resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))
from icore.workspace import Workspace
from icore.errors import IcoreError
done = {}
def step(name, f):
    try:
        return f()
    except IcoreError as e:
        print('TYPED', name, type(e).__name__, str(e)[:200])
ws = step('open', lambda: Workspace.sqlite({'k/*': 'o'}, d))
if ws is not None:
    for i in (0, 7, 30, 59):
        step(f'read k/{i}', lambda: ws.value(f'k/{i}'))
    if step('put big', lambda: ws.put('k/big', {'pad': 'y' * 300_000})) is not None:
        done['k/big'] = {'pad': 'y' * 300_000}
    if step('put small', lambda: ws.put('k/new', {'n': 1})) is not None:
        done['k/new'] = {'n': 1}
    ag = ws.agent('a')
    step('agent read', lambda: ag.read('k/7'))
    step('execute', lambda: ag.execute('t', lambda **kw: 'ran', {}, depends_on={'k/7'}))
    if step('update', lambda: ws.update('k/30', lambda v: {**v, 'u': 1})) is not None:
        done['k/30'] = {'v': 30, 'pad': 'p' * 300, 'u': 1}
json.dump(done, open(out, 'w'))
"""

_STORE_CHECK = r"""
import json, sys
from icore.workspace import Workspace
d, out = sys.argv[1], sys.argv[2]
done = json.load(open(out))
ws = Workspace.sqlite({'k/*': 'o'}, d)
lost = []
for i in range(60):
    want = done.get(f'k/{i}', {'v': i, 'pad': 'p' * 300})
    if ws.value(f'k/{i}', default=None) != want:
        lost.append(f'k/{i}')
for k, v in done.items():
    if ws.value(k, default=None) != v:
        lost.append(k)
if lost:
    print('LOST committed facts no longer read back:', lost[:10]); sys.exit(9)
print('KEPT every committed fact')
"""

_DAMAGES = ["bytes-1", "bytes-64", "bytes-1000", "cut", "empty", "wal-garbage", "dir",
            "ro-file", "ro-folder", "fsize-40000", "fsize-70000", "fsize-200000",
            "fsize-600000"]


def _damage(d: Path, how: str, rng: Any) -> list[str]:
    """Damage the store folder ``d``; the prefix of the run's argv (cap drop, limits)."""
    db = d / "o.db"
    size = db.stat().st_size
    if how.startswith("bytes-"):
        n = int(how.split("-")[1])
        off = rng.randrange(0, size - n)
        with db.open("r+b") as f:
            f.seek(off)
            f.write(bytes(rng.randrange(256) for _ in range(n)))
    elif how == "cut":
        with db.open("r+b") as f:
            f.truncate(rng.randrange(100, size))
    elif how == "empty":
        db.write_bytes(b"")
    elif how == "wal-garbage":
        (d / "o.db-wal").write_bytes(bytes(rng.randrange(256) for _ in range(5000)))
    elif how == "dir":
        db.unlink()
        db.mkdir()
    elif how == "ro-file":
        db.chmod(0o444)
        return NOCAP
    elif how == "ro-folder":
        d.chmod(0o555)
        return NOCAP
    return []


def store_damage(b: Builder, per_seed: int = 10) -> None:
    """A committed SQLite workspace damaged one way, then used (sampled damages)."""
    env = {**os.environ, "PYTHONPATH": os.environ.get("PYTHONPATH", str(_REPO / "src"))}
    picked = sorted(b.rng.sample(_DAMAGES, min(per_seed, len(_DAMAGES))))
    for how in picked:
        cid = f"store9/{how}"
        d = b._dir(cid)
        st = d / "facts"
        subprocess.run([sys.executable, "-c", _SEED_STORE, str(st)], check=True, env=env,
                       capture_output=True, timeout=120)
        prefix = _damage(st, how, b.rng)
        fsize = int(how.split("-")[1]) if how.startswith("fsize-") else 0
        (d / "run.py").write_text(_STORE_RUN)
        (d / "check.py").write_text(_STORE_CHECK)
        done = d / "done.json"
        keep = how.startswith(("fsize-", "ro-"))  # the file itself is intact
        code = (f"import subprocess, sys\nr = subprocess.run({prefix!r} + [sys.executable, "
                f"{str(d / 'run.py')!r}, {str(st)!r}, '{fsize}', {str(done)!r}])\n"
                f"print('RUN', r.returncode)\n"
                f"if r.returncode != 0:\n    sys.exit(r.returncode)\n")
        if keep:
            code += (f"import os\nos.chmod({str(st)!r}, 0o755)\n"
                     f"os.chmod({str(st / 'o.db')!r}, 0o644)\n"
                     f"sys.exit(subprocess.run([sys.executable, {str(d / 'check.py')!r}, "
                     f"{str(st)!r}, {str(done)!r}]).returncode)\n")
        b.cases.append(Case(cid, "store-damage", ["PY", code], names=[], timeout=240,
                            ok_codes=(0,)))


# ----------------------------------------------------------------------------- gw-store
_UNNAMED = r'''
import re as _re
fin9 = fin
def fin(code):
    """Round 5's end (the gateway stopped), then: every ``error:`` line names its file."""
    try:
        fin9(code)
    except SystemExit as done:
        code = done.code
    try:
        err = open(man + ".err", "rb").read().decode("utf-8", "replace")
    except OSError:
        err = ""
    for ln in err.splitlines():
        if ln.startswith("error: ") and not _re.search(r"[/\\]|\.(yaml|db|jsonl|json)\b",
                                                        ln):
            print("UNNAMED an error line names no file:", ln[:200]); code = code or 11
    sys.exit(code)
'''


def gw_store(b: Builder, per_seed: int = 6) -> None:
    """A real gateway on a damaged, read-only or size-limited SQLite store (sampled)."""
    damages = ["bytes-64", "bytes-1000", "cut", "wal-garbage", "ro-folder", "fsize-40000",
               "fsize-70000", "fsize-120000", "trace-ro"]
    env = {**os.environ, "PYTHONPATH": os.environ.get("PYTHONPATH", str(_REPO / "src"))}
    for how in sorted(b.rng.sample(damages, min(per_seed, len(damages)))):
        cid = f"gwstore9/{how}"
        d = b._dir(cid)
        (d / "keep.txt").write_text("the user's own file\n")
        man, drv = round5._fake_gateway(d, "none:none", 5)
        seed = drv.read_text()
        r = subprocess.run([sys.executable, str(drv), str(man), str(d / "trace.jsonl")],
                           cwd=d, env=env, capture_output=True, timeout=200)
        if r.returncode != 0:
            raise RuntimeError(f"round 9: the honest gateway run failed: {r.stdout[-500:]!r}")
        (d / "trace.jsonl").unlink()
        prefix: list[str] = []
        if how.startswith("fsize-"):
            prefix = ["prlimit", f"--fsize={how.split('-')[1]}"]
        elif how == "trace-ro":
            doc = yaml.safe_load(man.read_text())
            doc["trace"] = "ro/trace.jsonl"
            (d / "ro").mkdir()
            (d / "ro").chmod(0o555)
            man.write_text(yaml.safe_dump(doc))
            prefix = NOCAP
        else:
            prefix = _damage(d / "facts", how, b.rng) if (d / "facts" / "o.db").exists() \
                else _damage_any(d / "facts", how, b.rng)
        text = seed.replace("p = subprocess.Popen([sys.executable",
                            f"p = subprocess.Popen([*{prefix!r}, sys.executable")
        # a big argument makes the store's WAL and the trace grow past a size limit
        text = text.replace('{"value": "120"}', '{"value": "9" * 50000}')
        text = text.replace("reqs = [", _UNNAMED + "reqs = [", 1)
        drv.write_text(text)
        b.cases.append(round5.driver_case(cid, "gw-store", d, man, drv))


def _damage_any(folder: Path, how: str, rng: Any) -> list[str]:
    """:func:`_damage` on the first ``.db`` of the gateway's store folder."""
    dbs = sorted(folder.glob("*.db"))
    tmp = folder / "o.db"
    shutil.move(dbs[0], tmp)
    try:
        return _damage(folder, how, rng)
    finally:
        if tmp.exists() or tmp.is_dir():
            shutil.move(tmp, dbs[0])


# --------------------------------------------------------------------------- chain-edit
_CHAIN_VALUES: dict[str, Any] = {
    "null": None, "true": True, "zero": 0, "neg": -1, "big": 2**64, "float": 1.5,
    "str": "x", "empty": "", "list": [], "obj": {}, "int-str": "1", "surrogate": "\ud800",
    "1MB": "x" * (1 << 20)}


def _chain_edits(lines: list[Any], rng: Any, n: int) -> dict[str, str]:
    """Name -> file text: chain fields edited, writer ids shared, garbage and huge lines."""
    out: dict[str, str] = {}

    def text(doc: list[Any]) -> str:
        return "".join((x if isinstance(x, str) else round8._dump(x)) + "\n" for x in doc)
    combos = []
    for i, x in enumerate(lines):
        for part in ("chain", "chain_end"):
            if isinstance(x, dict) and isinstance(x.get(part), dict):
                combos += [(i, part, k, v) for k in [*x[part], "extra"]
                           for v in [*_CHAIN_VALUES, "drop"]]
                combos += [(i, part, None, v) for v in [*_CHAIN_VALUES, "drop"]]
    for i, part, k, v in rng.sample(combos, min(n, len(combos))):
        doc = copy.deepcopy(lines)
        node = doc[i]
        if k is None:
            if v == "drop":
                node.pop(part)
            else:
                node[part] = _CHAIN_VALUES[v]
        elif v == "drop":
            node[part].pop(k, None)
        else:
            node[part][k] = _CHAIN_VALUES[v]
        out[f"field/l{i}/{part}.{k}={v}"] = text(doc)
    writers = {x["chain"]["writer"] for x in lines if isinstance(x, dict) and "chain" in x}
    if writers:
        w = sorted(writers)[0]
        doc = copy.deepcopy(lines)
        extra = copy.deepcopy([x for x in lines if isinstance(x, dict) and "chain" in x][-1])
        extra["chain"]["seq"] = 1
        extra["chain"]["prev"] = ""
        doc.insert(len(doc) - 1, extra)  # a second writer's first line under the same id
        out["writer/second-under-one-id"] = text(doc)
        doc = copy.deepcopy(lines)
        doc.insert(len(doc) - 1, copy.deepcopy(doc[-1]))
        out["writer/two-chain-ends"] = text(doc)
        doc = [copy.deepcopy(x) for x in lines]
        for x in doc:
            if isinstance(x, dict) and "chain" in x and x["chain"]["seq"] % 2 == 0:
                x["chain"]["writer"] = w[::-1]
        out["writer/split-in-two"] = text(doc)
    pos = rng.randrange(1, len(lines))
    garbage = bytes(rng.randrange(256) for _ in range(300)).decode("latin-1")
    out["insert/garbage-line"] = text([*lines[:pos], garbage, *lines[pos:]])
    out["insert/50MB-line"] = text([*lines[:pos], '{"kind": "thought", "agent": "shipper", '
                                    '"content": "' + "x" * (50 << 20) + '"}', *lines[pos:]])
    full = text(lines)
    cut = rng.randrange(1, len(full))
    out[f"truncate/at-{cut}"] = full[:cut]
    return out


def chain_edit(b: Builder, work: Path, per_seed: int = 24) -> None:
    """The round-8 recorded run with its chain edited (``--fail-on invalid`` checked)."""
    p0 = work / "round8-base" / "r.jsonl"
    js = work / "round8-base" / "honest.json"
    if not p0.is_file() or not js.is_file():
        return
    honest = round8._verdicts(json.loads(js.read_text()))
    lines = [json.loads(x) for x in p0.read_text(encoding="utf-8").splitlines() if x.strip()]
    drv = work / "round8-check.py"
    for name, body in sorted(_chain_edits(lines, b.rng, per_seed).items()):
        b.cases.append(round8.check_case(b, f"chain9/{name}", "chain-edit", drv, body,
                                         honest, "0", (0, 1, 2, 3)))


def all_families(b: Builder, work: Path) -> None:
    """Every family of this module (after round 8's, whose base trace it edits)."""
    fence_api(b)
    store_damage(b)
    gw_store(b)
    chain_edit(b, work)


__all__ = ["all_families"]
