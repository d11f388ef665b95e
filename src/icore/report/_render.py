"""Render a :class:`RunView` / :class:`IndexView` to static HTML that works offline.

Pages reference only the assets shipped in this package (``assets/report.css``,
``assets/report.js``), copied next to them; plots are inline SVG. Nothing is fetched
from a network. Layout (positions of graph nodes, timeline coordinates) is the only
arithmetic done here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import jinja2

from icore.report._model import IndexView, MetricPointView, ObligationView, RunView

ASSETS = ("report.css", "report.js")
"""Files of ``icore/report/assets`` every page may reference (copied to ``<out>/assets``)."""

_NODE_W, _NODE_H, _COL_GAP, _ROW_GAP, _PAD = 170, 34, 60, 12, 10


@dataclass(frozen=True, slots=True)
class _Node:
    o: ObligationView
    x: float
    y: float


@dataclass(frozen=True, slots=True)
class _Edge:
    x1: float
    y1: float
    x2: float
    y2: float
    cls: str
    label: str


@dataclass(frozen=True, slots=True)
class _Graph:
    nodes: tuple[_Node, ...]
    edges: tuple[_Edge, ...]
    width: float
    height: float


def _layout(obligations: tuple[ObligationView, ...]) -> _Graph:
    """Left-to-right layered layout: column = depth in the parent tree, rows in order."""
    by_id = {o.id: o for o in obligations}
    depth: dict[str, int] = {}

    def d(oid: str, seen: frozenset[str] = frozenset()) -> int:
        if oid in depth:
            return depth[oid]
        o = by_id[oid]
        if o.parent is None or o.parent not in by_id or o.parent in seen:
            depth[oid] = 0
        else:
            depth[oid] = d(o.parent, seen | {oid}) + 1
        return depth[oid]

    cols: dict[int, list[ObligationView]] = {}
    for o in obligations:
        cols.setdefault(d(o.id), []).append(o)
    pos: dict[str, tuple[float, float]] = {}
    nodes: list[_Node] = []
    height = 0.0
    for c in sorted(cols):
        for r, o in enumerate(cols[c]):
            x = _PAD + c * (_NODE_W + _COL_GAP)
            y = _PAD + r * (_NODE_H + _ROW_GAP)
            pos[o.id] = (x, y)
            nodes.append(_Node(o, x, y))
            height = max(height, y + _NODE_H + _PAD)
    edges: list[_Edge] = []

    def edge(a: str, b: str, cls: str, label: str) -> None:
        if a in pos and b in pos:
            (ax, ay), (bx, by) = pos[a], pos[b]
            edges.append(_Edge(ax + _NODE_W, ay + _NODE_H / 2, bx, by + _NODE_H / 2, cls, label))

    for o in obligations:
        if o.parent is not None:
            edge(o.parent, o.id, "edge-parent", "parent")
        for dep in o.deps:
            edge(dep, o.id, "edge-dep", "depends on")
        for name, other in o.relations:
            edge(o.id, other, "edge-rel", name)
    width = _PAD * 2 + (max(cols, default=0) + 1) * (_NODE_W + _COL_GAP)
    return _Graph(tuple(nodes), tuple(edges), width, max(height, _NODE_H + 2 * _PAD))


@dataclass(frozen=True, slots=True)
class _Plot:
    width: float
    height: float
    lines: tuple[tuple[str, str], ...]  # (css class, points)
    x_ticks: tuple[tuple[float, str], ...]
    y_ticks: tuple[tuple[float, str], ...]
    left: float
    bottom: float


def _timeline(points: tuple[MetricPointView, ...]) -> _Plot | None:
    if not points:
        return None
    w, h, left, right, top, bottom = 720.0, 200.0, 40.0, 10.0, 10.0, 24.0
    lo = min(p.step for p in points)
    hi = max(p.step for p in points)
    span = max(hi - lo, 1)

    def px(step: int) -> float:
        return left + (step - lo) / span * (w - left - right)

    def py(v: float) -> float:
        return top + (1.0 - v) * (h - top - bottom)

    lines = []
    for name in ("snd", "astab", "cq"):
        pts = " ".join(f"{px(p.step):.1f},{py(getattr(p, name)):.1f}" for p in points)
        lines.append((f"line-{name}", pts))
    step = next(s for s in (1, 2, 5, 10, 20, 25, 50, 100, 200, 250, 500, 1000, 10**9)
                if span / s <= 10)
    first = -(-lo // step) * step
    xt = tuple((px(v), str(v)) for v in range(first, hi + 1, step))
    yt = tuple((py(v), f"{v:g}") for v in (0.0, 0.25, 0.5, 0.75, 1.0))
    return _Plot(w, h, tuple(lines), xt, yt, left, h - bottom)


def _env() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("icore.report", "templates"),
        autoescape=jinja2.select_autoescape(["html", "j2"]),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["anchor"] = anchor
    return env


def anchor(value: object) -> str:
    """An HTML-id-safe form of an id (``m12.stall`` -> ``m12-stall``)."""
    return re.sub(r"[^A-Za-z0-9_-]", "-", str(value))


def report_filename(run_id: str) -> str:
    """The file name of a run's report: ``<safe id>.html``."""
    return f"{anchor(run_id)}.html"


def copy_assets(out_dir: Path) -> list[Path]:
    """Copy the bundled assets into ``out_dir/assets`` (idempotent)."""
    dst = out_dir / "assets"
    dst.mkdir(parents=True, exist_ok=True)
    out = []
    root = resources.files("icore.report").joinpath("assets")
    for name in ASSETS:
        data = root.joinpath(name).read_bytes()
        p = dst / name
        if not p.exists() or p.read_bytes() != data:
            p.write_bytes(data)
        out.append(p)
    return out


def render_report(view: RunView, out_dir: str | Path) -> Path:
    """Render one run's report to ``out_dir/<id>.html`` (assets copied alongside).

    Args:
        view: the run's view model (built by :func:`view_from_audit` or by a live run).
        out_dir: output folder (created if missing).

    Returns:
        The path of the HTML file.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    copy_assets(out)
    html = _env().get_template("run.html.j2").render(
        run=view, graph=_layout(view.obligations), plot=_timeline(view.timeline),
        asset_prefix="assets/",
    )
    path = out / report_filename(view.id)
    path.write_text(html, encoding="utf-8")
    return path


def render_index(view: IndexView, out_dir: str | Path) -> Path:
    """Render the index page to ``out_dir/index.html`` (assets copied alongside)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    copy_assets(out)
    html = _env().get_template("index.html.j2").render(index=view, asset_prefix="assets/")
    path = out / "index.html"
    path.write_text(html, encoding="utf-8")
    return path


__all__ = ["ASSETS", "anchor", "copy_assets", "render_index", "render_report",
           "report_filename"]
