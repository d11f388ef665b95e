"""The importer value pool at many more paths, in process (issue 29).

The subprocess sweep samples ``--per-format`` (path, value) pairs per importer (about
1.5 s each); this tries thousands (about 70 files/s): each mutated file is audited with
:func:`icore.adapters.audit_path` in this process, and any exception that is not an
:class:`icore.errors.IcoreError` is a defect, grouped by type and innermost icore frame.
It found the OTLP ``arrayValue.values: -Infinity`` TypeError that seed 7's sample missed.
"""

from __future__ import annotations

import random
import sys
import traceback
from typing import Any

from . import cases as C

_DELETE = object()


def run(b: C.Builder, rng: random.Random, per_format: int) -> dict[str, Any]:
    """Audit ``per_format`` sampled (path, value or deletion) mutations of each seed.

    Returns:
        ``{"inputs": n, "defects": {cause: [count, example]}}``.
    """
    from icore.adapters import audit_path
    from icore.errors import IcoreError

    causes: dict[str, list[Any]] = {}
    n = 0
    d = b.root / "inproc"
    d.mkdir(parents=True, exist_ok=True)
    for fmt, (name, kind, doc) in b.formats.items():
        ops = [(p, v) for p in C._paths(doc) for v in [*C.BAD, _DELETE]
               if v is not _DELETE or isinstance(p[-1], str)]
        for path, v in rng.sample(ops, min(per_format, len(ops))):
            mutated = C._set(doc, path, None, delete=True) if v is _DELETE else \
                C._set(doc, path, v)
            limit = sys.get_int_max_str_digits()
            sys.set_int_max_str_digits(0)  # the writer's 5000-digit ints
            try:
                p = b.write_doc(d, name, kind, mutated)
            finally:
                sys.set_int_max_str_digits(limit)
            n += 1
            try:
                audit_path(p)
            except IcoreError:
                pass
            except Exception as exc:  # the defect this looks for
                tb = traceback.extract_tb(exc.__traceback__)
                ours = [f for f in tb if "/icore/" in f.filename] or tb
                where = f"{ours[-1].filename.split('/src/')[-1]}:{ours[-1].lineno}"
                key = f"{type(exc).__name__} at {where}"
                causes.setdefault(key, [0, f"{fmt} {path} = {v!r:.40}"])[0] += 1
    return {"inputs": n, "defects": causes}


def report(res: dict[str, Any]) -> None:
    """One line of counts, then one line a cause with an example."""
    total = sum(c for c, _ in res["defects"].values())
    print(f"\nin process: {res['inputs']} mutated files, {total} raised no icore error")
    for cause, (count, example) in sorted(res["defects"].items(), key=lambda kv: -kv[1][0]):
        print(f"  {count:4}  {cause}\n        e.g. {example}")


__all__ = ["report", "run"]
