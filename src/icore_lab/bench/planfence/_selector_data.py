"""The learned policy selector's data: scenarios, features, labels (planfence App. B.2).

The campaign of scenarios (:func:`campaign`: in-distribution splits and the
out-of-distribution blocks), their features, the per-policy outcomes replayed for each
(:class:`PolicyOutcome`), the near-optimal label and the cached dataset
(:func:`build_dataset`). The learners and Table 10 are in
:mod:`icore_lab.bench.planfence._selector`.
"""

from __future__ import annotations

import hashlib
import json
import math
import random
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from icore_lab.bench.planfence._presets import CENTRAL, FENCE, SYNC1, Cell
from icore_lab.bench.planfence._spec import NetSpec
from icore_lab.workloads import FAMILIES, Template, WorkloadParams

CHOICES = (CENTRAL.label, SYNC1.label, FENCE.label)
"""The policies a selector may choose (all exact-lineage)."""


FALLBACK = FENCE.label
"""What malformed or unavailable selector output falls back to."""


NEAR = 0.10
"""Practical-tie threshold of the safe near-optimal label (10% of the lowest stall)."""


ID_LINKS = ("loopback", "att", "tmobile")


ID_RHOS = (0.25, 1.0, 4.0, 16.0)


ID_KEYS = (16, 32, 64)


OOD_LINK = "verizon"


OOD_RHOS = (0.5, 2.0, 8.0)


OOD_KEYS = (8, 128)


AGENTS = (3, 5, 8)


HORIZONS = (16, 32, 64)


DEPS = (1, 2)


OFFSETS_MS = (0.0, 5000.0, 15000.0)


SPLITS = {"train": 648, "dev": 144, "id_test": 180}


OOD_BLOCKS = {"ood_verizon": 90, "ood_rate": 90, "ood_keys": 90, "ood_compound": 90}


FEATURES = ("agents", "keys", "log2_keys", "work_units", "rho", "log2_rho", "deps",
            "loopback", "up_mbps", "down_mbps", "up_outage", "down_outage")
"""Selector inputs: pre-action workload dimensions and static trace calibration."""


# --- the campaign ---------------------------------------------------------------------
@dataclass(frozen=True)
class ExampleSpec:
    """One example of the campaign: a workload setting, a network, six workflows.

    Attributes:
        id: example id (``ex0000``).
        split: ``train``, ``dev``, ``id_test`` or an OOD block name.
        params: workload parameters (shared by the six workflows).
        link / offset_ms: the network.
        templates: the six templates (two per family).
    """

    id: str
    split: str
    params: WorkloadParams
    link: str
    offset_ms: float
    templates: tuple[Template, ...]

    @property
    def net(self) -> NetSpec:
        """The replay network."""
        return NetSpec(link=self.link, offset_ms=0.0 if self.link == "loopback"
                       else self.offset_ms)

    def cell(self) -> Cell:
        """The replay cell of this example (three policies, six templates)."""
        return Cell("selector", self.id, self.params, self.net, (CENTRAL, SYNC1, FENCE),
                    {"split": self.split}, templates=self.templates)


def _draw(rng: random.Random, *, links: Sequence[str], rhos: Sequence[float],
          keys: Sequence[int], seed: int) -> tuple[WorkloadParams, str, float,
                                                    tuple[Template, ...]]:
    link = rng.choice(list(links))
    k = rng.choice(list(keys))
    p = WorkloadParams(agents=rng.choice(AGENTS), keys=k, work_units=rng.choice(HORIZONS),
                       rho=rng.choice(list(rhos)), deps=min(rng.choice(DEPS), k),
                       master_seed=seed)
    tpls = tuple(Template(f, s) for f in FAMILIES for s in rng.sample(range(10), 2))
    return p, link, rng.choice(OFFSETS_MS), tpls


def campaign(seed: int = 0, scale: float = 1.0) -> list[ExampleSpec]:
    """The examples of the campaign (paper protocol at ``scale=1``: 1,332 examples).

    ``scale`` shrinks every split proportionally (at least 4 examples each); the draws of
    a smaller campaign are a prefix of the larger one's.

    Raises:
        ValueError: ``scale`` is not in (0, 1].
    """
    if not 0.0 < scale <= 1.0:
        raise ValueError(f"scale must be in (0, 1], not {scale}")
    out: list[ExampleSpec] = []
    rng_id = random.Random(f"selector-id-{seed}")
    n_id = {k: max(4, round(v * scale)) for k, v in SPLITS.items()}
    id_draws = [_draw(rng_id, links=ID_LINKS, rhos=ID_RHOS, keys=ID_KEYS, seed=seed)
                for _ in range(sum(SPLITS.values()))]
    # split a fixed shuffle of the full ID pool, so smaller scales keep their prefix
    order = list(range(len(id_draws)))
    random.Random(f"selector-split-{seed}").shuffle(order)
    start = 0
    full = dict(SPLITS)
    for split, n in n_id.items():
        for j in order[start:start + n]:
            p, link, off, tpls = id_draws[j]
            out.append(ExampleSpec(f"ex{len(out):04d}", split, p, link, off, tpls))
        start += full[split]
    shifts: dict[str, dict[str, Any]] = {
        "ood_verizon": {"links": (OOD_LINK,), "rhos": ID_RHOS, "keys": ID_KEYS},
        "ood_rate": {"links": ID_LINKS, "rhos": OOD_RHOS, "keys": ID_KEYS},
        "ood_keys": {"links": ID_LINKS, "rhos": ID_RHOS, "keys": OOD_KEYS},
        "ood_compound": {"links": (OOD_LINK,), "rhos": OOD_RHOS, "keys": OOD_KEYS},
    }
    for block, n in OOD_BLOCKS.items():
        rng = random.Random(f"selector-{block}-{seed}")
        for _ in range(max(4, round(n * scale))):
            p, link, off, tpls = _draw(rng, seed=seed, **shifts[block])
            out.append(ExampleSpec(f"ex{len(out):04d}", block, p, link, off, tpls))
    return out


# --- static trace calibration ---------------------------------------------------------
_CALIBRATION: dict[str, dict[str, float]] = {}


def calibration(link: str) -> dict[str, float]:
    """Static calibration of a link from its trace files (no trace events of a run).

    Mean capacity (Mbit/s, 1500-byte opportunities) and the share of 100 ms windows with
    no delivery opportunity, per direction. Loopback: a fixed fast, lossless profile.
    """
    hit = _CALIBRATION.get(link)
    if hit is not None:
        return hit
    if link == "loopback":
        out = {"loopback": 1.0, "up_mbps": 1000.0, "down_mbps": 1000.0,
               "up_outage": 0.0, "down_outage": 0.0}
    else:
        from icore_lab.net import TRACE_FILES, traces_dir

        out = {"loopback": 0.0}
        for direction, name in zip(("up", "down"), TRACE_FILES[link], strict=True):
            ts = np.array((traces_dir() / name).read_bytes().split(), dtype=np.int64)
            span_ms = float(max(int(ts[-1]), 1))
            out[f"{direction}_mbps"] = len(ts) * 1500 * 8 / (span_ms / 1000) / 1e6
            windows = np.bincount(ts // 100, minlength=int(span_ms // 100) + 1)
            out[f"{direction}_outage"] = float(np.mean(windows == 0))
    _CALIBRATION[link] = out
    return out


def features(ex: ExampleSpec) -> list[float]:
    """The selector's inputs for ``ex`` (see :data:`FEATURES`)."""
    p = ex.params
    c = calibration(ex.link)
    return [float(p.agents), float(p.keys), math.log2(p.keys), float(p.work_units),
            float(p.rho), math.log2(p.rho), float(p.deps), c["loopback"],
            math.log10(c["up_mbps"]), math.log10(c["down_mbps"]), c["up_outage"],
            c["down_outage"]]


# --- outcomes and labels --------------------------------------------------------------
@dataclass(frozen=True)
class PolicyOutcome:
    """One policy's aggregate over the six workflows of an example.

    Attributes:
        actions / completed / invalid: protected actions scheduled, run, run invalid.
        stall_ms: pooled stall per action, ms.
        kib: pooled traffic per action, KiB.
    """

    actions: int
    completed: int
    invalid: int
    stall_ms: float
    kib: float

    @property
    def eligible(self) -> bool:
        """No invalid action and every scheduled action completed."""
        return self.invalid == 0 and self.completed == self.actions


def label(outcomes: Mapping[str, PolicyOutcome]) -> str | None:
    """The safe near-optimal policy, or None when no policy is eligible.

    Among eligible policies within 10% of the lowest stall, the one with the least traffic.
    """
    ok = {p: o for p, o in outcomes.items() if o.eligible}
    if not ok:
        return None
    best = min(o.stall_ms for o in ok.values())
    near = [p for p, o in ok.items() if o.stall_ms <= best * (1 + NEAR) + 1e-9]
    return min(near, key=lambda p: (ok[p].kib, ok[p].stall_ms, CHOICES.index(p)))


@dataclass
class Example:
    """An example with its outcomes (a dataset row)."""

    spec: ExampleSpec
    features: list[float]
    """The feature vector (JSON key ``x``)."""
    outcomes: dict[str, PolicyOutcome]
    target: str | None

    def to_json(self) -> dict[str, Any]:
        """JSON form (the cached dataset)."""
        s = self.spec
        return {"id": s.id, "split": s.split, "params": s.params.to_dict(), "link": s.link,
                "offset_ms": s.offset_ms, "templates": [t.id for t in s.templates],
                "x": self.features, "outcomes": {p: asdict(o) for p, o in self.outcomes.items()},
                "label": self.target}


def outcomes_from_rows(rows: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, PolicyOutcome]]:
    """Aggregate replay rows (``run_cells`` rows) per example and policy."""
    acc: dict[str, dict[str, list[float]]] = {}
    for r in rows:
        a = acc.setdefault(r["cell"], {}).setdefault(r["policy"], [0, 0, 0, 0.0, 0.0])
        a[0] += 1
        a[1] += int(r["executed"])
        a[2] += int(r["invalid"])
        a[3] += float(r["stall_ms"])
        a[4] += float(r["bytes"])
    return {cell: {p: PolicyOutcome(int(v[0]), int(v[1]), int(v[2]), v[3] / v[0],
                                    v[4] / 1024 / v[0]) for p, v in per.items()}
            for cell, per in acc.items()}


def protocol_digest(specs: Sequence[ExampleSpec]) -> str:
    """A digest of the campaign (cache key of the dataset)."""
    text = json.dumps([[s.id, s.split, s.params.to_dict(), s.link, s.offset_ms,
                        [t.id for t in s.templates]] for s in specs], sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def build_dataset(specs: Sequence[ExampleSpec], *, cache: Path | None = None,
                  workers: int = 1, progress: Callable[[int, int], None] | None = None
                  ) -> tuple[list[Example], dict[str, Any]]:
    """Replay the campaign (or load it from ``cache``) and label every example.

    Returns:
        ``(examples, cost)``; ``cost`` has ``episodes``, ``wall_s``, ``cached``.

    Raises:
        ReplayFailed: an episode could not finish.
    """
    from icore_lab.bench.planfence._cells import run_cells

    digest = protocol_digest(specs)
    if cache is not None and cache.is_file():
        data = json.loads(cache.read_text(encoding="utf-8"))
        if data.get("digest") == digest:
            by_id = {e["id"]: e for e in data["examples"]}
            out = []
            for s in specs:
                e = by_id[s.id]
                oc = {p: PolicyOutcome(**o) for p, o in e["outcomes"].items()}
                out.append(Example(s, features(s), oc, e["label"]))
            return out, {**data["cost"], "cached": True}
    t0 = time.perf_counter()
    res = run_cells([s.cell() for s in specs], workers=workers, progress=progress)
    per = outcomes_from_rows(res.rows)
    out = [Example(s, features(s), per[s.id], label(per[s.id])) for s in specs]
    cost = {"episodes": res.episodes, "jobs": res.jobs, "wall_s": round(
        time.perf_counter() - t0, 1), "workers": res.workers, "cached": False}
    if cache is not None:
        cache.parent.mkdir(parents=True, exist_ok=True)
        cache.write_text(json.dumps({"digest": digest, "cost": cost,
                                     "examples": [e.to_json() for e in out]}),
                         encoding="utf-8")
    return out, cost


__all__ = [
    "CHOICES",
    "FALLBACK",
    "FEATURES",
    "OOD_BLOCKS",
    "SPLITS",
    "Example",
    "ExampleSpec",
    "PolicyOutcome",
    "build_dataset",
    "calibration",
    "campaign",
    "features",
    "label",
    "outcomes_from_rows",
    "protocol_digest",
]
