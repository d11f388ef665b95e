"""Render a :class:`RunView` / :class:`LiveRunView` / :class:`IndexView` to offline HTML.

By default a page is one file: the bundled CSS and JS (``assets/report.css``,
``assets/report.js``) are inlined, allowed by a Content-Security-Policy that names their
SHA-256 hashes, and every picture is inline SVG, so the page can be mailed or attached to
a ticket. With ``single_file=False`` the assets are copied to ``assets/`` beside the page
instead. Nothing is fetched from a network. Layout (positions of graph nodes, lanes,
pages of G, timeline coordinates) is the only arithmetic done here.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import jinja2
from markupsafe import Markup

from icore._files import write_owned
from icore.report._view_model import (
    EventView,
    IndexView,
    LineageView,
    LiveRunView,
    MetricPointView,
    ObligationView,
    RunView,
)

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


MAX_GRAPH_EDGES = 5_000
"""Most edges the obligation graph draws (parent edges first); the page says how many
more there are (a run whose every obligation depends on every earlier one has
quadratically many: 4,000 agents gave 10^6 edges and a 200 MB page)."""


@dataclass(frozen=True, slots=True)
class _Graph:
    nodes: tuple[_Node, ...]
    edges: tuple[_Edge, ...]
    width: float
    height: float
    omitted: int = 0


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
    omitted = 0

    def edge(a: str, b: str, cls: str, label: str) -> None:
        nonlocal omitted
        if a in pos and b in pos:
            if len(edges) >= MAX_GRAPH_EDGES:
                omitted += 1
                return
            (ax, ay), (bx, by) = pos[a], pos[b]
            edges.append(_Edge(ax + _NODE_W, ay + _NODE_H / 2, bx, by + _NODE_H / 2, cls, label))

    for o in obligations:
        if o.parent is not None:
            edge(o.parent, o.id, "edge-parent", "parent")
    for o in obligations:
        for dep in o.deps:
            edge(dep, o.id, "edge-dep", "depends on")
        for name, other in o.relations:
            edge(o.id, other, "edge-rel", name)
    width = _PAD * 2 + (max(cols, default=0) + 1) * (_NODE_W + _COL_GAP)
    return _Graph(tuple(nodes), tuple(edges), width, max(height, _NODE_H + 2 * _PAD),
                  omitted)


@dataclass(frozen=True, slots=True)
class _Plot:
    width: float
    height: float
    lines: tuple[tuple[str, str], ...]  # (css class, points)
    x_ticks: tuple[tuple[float, str], ...]
    y_ticks: tuple[tuple[float, str], ...]
    left: float
    bottom: float


def _tick_step(span: int) -> int:
    """The smallest of 1, 2, 5, 10, 20, 25, 50, ... giving at most 10 ticks over ``span``.

    Unbounded: a run whose step indexes span 10**15 (or more) still gets 10 ticks.
    """
    e = 0
    while True:
        base = 10**e
        for s in (base, 2 * base, base * 5 // 2 if e else 0, 5 * base):
            if s and span <= 10 * s:
                return s
        e += 1


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
    step = _tick_step(span)
    first = -(-lo // step) * step
    xt = tuple((px(v), str(v)) for v in range(first, hi + 1, step))
    yt = tuple((py(v), f"{v:g}") for v in (0.0, 0.25, 0.5, 0.75, 1.0))
    return _Plot(w, h, tuple(lines), xt, yt, left, h - bottom)


# --------------------------------------------------------------------- G as a graph
EVENTS_PER_PAGE = 100
"""Events of G drawn per page of the graph (pages switch in the browser; 1,000+ events
stay readable and the DOM small per page)."""

_LANE_H, _LABEL_W, _STEP_W, _TOP = 30.0, 130.0, 26.0, 24.0
_LABELLED_MAX, _STEP_W_LABELLED = 40, 96.0


@dataclass(frozen=True, slots=True)
class _GNode:
    e: EventView
    x: float
    y: float
    n: int  # 1-based position in G


@dataclass(frozen=True, slots=True)
class _GEdge:
    d: str  # SVG path
    cls: str
    label: str


@dataclass(frozen=True, slots=True)
class _GPage:
    number: int
    first: int
    last: int
    nodes: tuple[_GNode, ...]
    edges: tuple[_GEdge, ...]
    width: float
    labelled: bool  # few events: each node carries its type as a label
    lanes: tuple[tuple[str, float], ...] = ()  # (agent, y) drawn on this page
    height: float = 0.0


@dataclass(frozen=True, slots=True)
class _EventGraph:
    lanes: tuple[tuple[str, float], ...]  # (agent, y of the lane's centre)
    pages: tuple[_GPage, ...]
    height: float
    total: int
    edges: int
    page_lanes: bool = False  # many agents: a page draws only the lanes it uses


ALL_LANES_MAX = 40
"""Up to this many agents every page of G's picture draws every agent's lane (a lane keeps
its place across pages); with more, a page draws only the lanes of the agents its events
and their causes belong to (4,000 agents × 41 pages drew 164,000 lanes, a 30 MB page)."""


def _event_graph(events: Sequence[EventView], per_page: int = EVENTS_PER_PAGE
                 ) -> _EventGraph | None:
    """Lay G out as lanes and columns, ``per_page`` events per page.

    One lane per agent, in order of first appearance; columns in the order events entered
    G. A cause on an earlier page is drawn as a stub from the page's left edge.
    """
    if not events:
        return None
    agents = list(dict.fromkeys(e.agent for e in events))
    rank = {a: i for i, a in enumerate(agents)}
    every_lane = len(agents) <= ALL_LANES_MAX
    lane_y = {a: _TOP + i * _LANE_H + _LANE_H / 2 for i, a in enumerate(agents)}
    height = _TOP + len(agents) * _LANE_H + 8
    page_of: dict[str, int] = {}
    pos: dict[str, tuple[float, float]] = {}
    agent_of: dict[str, str] = {}
    pages = []
    n_edges = 0
    for p, start in enumerate(range(0, len(events), per_page), start=1):
        chunk = events[start:start + per_page]
        if not every_lane:  # many agents: a page draws the lanes of the agents it shows
            here = {e.agent for e in chunk} | {agent_of[c] for e in chunk for c in e.causes
                                               if c in agent_of}
            shown = sorted(here, key=rank.__getitem__)
            lane_y = {a: _TOP + i * _LANE_H + _LANE_H / 2 for i, a in enumerate(shown)}
        labelled = len(chunk) <= _LABELLED_MAX
        step_w = _STEP_W_LABELLED if labelled else _STEP_W
        nodes = []
        for i, e in enumerate(chunk):
            x = _LABEL_W + step_w / 2 + i * step_w
            pos[e.id] = (x, lane_y[e.agent])
            page_of[e.id] = p
            agent_of[e.id] = e.agent
            nodes.append(_GNode(e, x, lane_y[e.agent], start + i + 1))
        edges = []
        for node in nodes:
            for c in node.e.causes:
                if c not in pos:
                    continue
                n_edges += 1
                x2, y2 = node.x, node.y
                if page_of[c] == p:
                    x1, y1 = pos[c]
                    mx = (x1 + x2) / 2
                    d = f"M{x1:.1f},{y1:.1f} C{mx:.1f},{y1:.1f} {mx:.1f},{y2:.1f} " \
                        f"{x2 - 6:.1f},{y2:.1f}"
                    edges.append(_GEdge(d, "cause", f"{c} → {node.e.id}"))
                else:
                    y1 = lane_y[agent_of[c]]  # its agent's lane on this page
                    d = f"M{_LABEL_W:.1f},{y1:.1f} C{_LABEL_W + 12:.1f},{y1:.1f} " \
                        f"{x2 - 14:.1f},{y2:.1f} {x2 - 6:.1f},{y2:.1f}"
                    edges.append(_GEdge(d, "cause offpage",
                                        f"{c} (page {page_of[c]}) → {node.e.id}"))
        width = _LABEL_W + len(chunk) * step_w + 10
        pages.append(_GPage(p, start + 1, start + len(chunk), tuple(nodes), tuple(edges),
                            width, labelled, tuple(lane_y.items()),
                            height if every_lane else _TOP + len(lane_y) * _LANE_H + 8))
    lanes = tuple((a, _TOP + i * _LANE_H + _LANE_H / 2) for i, a in enumerate(agents))
    return _EventGraph(lanes, tuple(pages), height, len(events), n_edges, not every_lane)


# ------------------------------------------------------------------ lineage picture
_REC_W, _REC_H, _REC_GAP, _KEY_W, _KEY_H = 118.0, 40.0, 22.0, 150.0, 52.0


@dataclass(frozen=True, slots=True)
class _LNode:
    id: str
    x: float
    y: float
    line1: str
    line2: str
    cls: str
    title: str
    tags: str  # short marks drawn above the box (F(x), H(x), stale...)


@dataclass(frozen=True, slots=True)
class _LineagePicture:
    keys: tuple[tuple[str, float], ...]
    nodes: tuple[_LNode, ...]
    edges: tuple[_GEdge, ...]
    width: float
    height: float


def _lineage_picture(lv: LineageView) -> _LineagePicture | None:
    """Records in lanes by key, columns in commit order, arrows from exact parents.

    Classes mark F(x), H(x), the stale plan, the revision that made it stale.
    """
    if not lv.records:
        return None
    first = lv.points[0] if lv.points else None
    last = lv.points[-1] if lv.points else None
    frontier = {rid for p in lv.points for _, rid in p.frontier}
    heads = {rid for _, rid in last.heads} if last else set()
    stale_plan = set(first.roots) if first is not None and first.stale else set()
    keys = list(dict.fromkeys(r.key for r in lv.records))
    key_y = {k: 20 + i * _KEY_H for i, k in enumerate(keys)}
    pos: dict[str, tuple[float, float]] = {}
    nodes = []
    for i, r in enumerate(lv.records):
        x = _KEY_W + i * (_REC_W + _REC_GAP)
        y = key_y[r.key]
        pos[r.id] = (x, y)
        cls = ["rec", f"role-{r.role}"]
        marks, tags = [], []
        if r.id in frontier:
            cls.append("in-frontier")
            marks.append("in F(x)")
            tags.append("F(x)")
        if r.id in heads:
            cls.append("is-head")
            marks.append("owner's head H(x)")
            tags.append("H(x)")
        if r.id in lv.stale_by:
            cls.append("stale-rev")
            marks.append("made the plan stale")
            tags.append("made plan stale")
        if r.id in stale_plan:
            cls.append("stale-plan")
            marks.append("stale plan")
            tags.append("stale")
        if r.id in lv.roots:
            cls.append("root")
            if lv.action and lv.ran:
                marks.append("plan the action ran from")
                tags.append("acted on")
            elif lv.action:  # refused: the gate never let it run
                marks.append("plan of the refused action (it never ran)")
                tags.append("refused")
            else:
                marks.append("plan root")
                tags.append("root")
        # an action record's number counts the agent's action records (every tool), not
        # versions of one call: "#3" of desk's actions, never "book v3" for a first call;
        # a fact's is its owner's sequence over all keys (App. A), so "seq 4", not "v4"
        version = ("" if r.seq is None else f" #{r.seq}" if r.role == "action"
                   else f" seq {r.seq}")
        said = (f" (action record #{r.seq} of {r.owner}'s, all tools)"
                if r.role == "action" and r.seq is not None else
                f" (seq {r.seq}: {r.owner}'s sequence over all its keys)"
                if r.seq is not None else "")
        title = (f"{r.role}: {r.key}{said} by {r.owner}\nid {r.id}\nparents: "
                 f"{', '.join(p[:8] for p in r.parents) or 'none'}"
                 f"{chr(10) + r.summary if r.summary else ''}"
                 f"{chr(10) + '; '.join(marks) if marks else ''}")
        nodes.append(_LNode(r.id, x, y, f"{r.role}{version}", r.id[:8], " ".join(cls),
                            title, " · ".join(tags)))
    edges = []
    for r in lv.records:
        for p in r.parents:
            if p in pos:
                (x1, y1), (x2, y2) = pos[p], pos[r.id]
                ax, ay = x1 + _REC_W, y1 + _REC_H / 2
                bx, by = x2, y2 + _REC_H / 2
                mx = (ax + bx) / 2
                edges.append(_GEdge(f"M{ax:.1f},{ay:.1f} C{mx:.1f},{ay:.1f} {mx:.1f},"
                                    f"{by:.1f} {bx - 5:.1f},{by:.1f}", "parent",
                                    f"{p[:8]} is a parent of {r.id[:8]}"))
    width = _KEY_W + len(lv.records) * (_REC_W + _REC_GAP) + 10
    height = 20 + len(keys) * _KEY_H
    return _LineagePicture(tuple((k, key_y[k]) for k in keys), tuple(nodes), tuple(edges),
                           width, height)


# ------------------------------------------------------------------------- pages
@functools.cache
def _env() -> jinja2.Environment:
    """The report templates' environment, built once per process.

    Each template is compiled on its first use, not once per report (a Collector
    file of 3,000 traces spent minutes compiling them again).
    """
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("icore.report", "templates"),
        autoescape=jinja2.select_autoescape(["html", "j2"]),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        finalize=shown,
    )
    env.filters["anchor"] = anchor
    env.filters["short"] = lambda v: str(v)[:8]
    env.globals["lineage_picture"] = _lineage_picture
    return env


_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e"
                      "\u2028\u2029\u2066-\u2069]")
"""What a page never shows raw: C0 but tab and newline, DEL, C1, bidi controls, line and
paragraph separators (the set the console escapes, ``icore.cli`` ``printable``)."""


def _visible(m: re.Match[str]) -> str:
    return "".join(f"\\x{ord(c):02x}" if ord(c) < 0x100 else f"\\u{ord(c):04x}"
                   for c in m.group(0))


def shown(value: Any) -> Any:
    r"""A value a page prints, its control characters as visible escapes (``\x1b``).

    Every ``{{ ... }}`` of the templates goes through it (the environment's
    ``finalize``): an agent name, a run id or a tool output holding ``ESC ] 0 ;`` or a
    bidi override (U+202E) reads as the text it is, as on the console (QA qa-new10 S4).
    Anything but a str, and a str with no such character, is returned as it is.
    """
    if isinstance(value, str) and _CONTROL.search(value) is not None:
        out = _CONTROL.sub(_visible, value)
        return Markup(out) if isinstance(value, Markup) else out
    return value


def anchor(value: object) -> str:
    """An HTML-id-safe form of an id (``m12.stall`` -> ``m12-stall``)."""
    return re.sub(r"[^A-Za-z0-9_-]", "-", str(value))


RESERVED_STEMS = frozenset({"index", "assets"})
"""File stems a report never takes (the index page and the assets folder), compared
case-insensitively (a case-insensitive file system)."""
MAX_STEM = 100
"""Longest report file stem, in characters (ASCII); longer ids are shortened."""


def report_filename(run_id: str) -> str:
    """The file name of a run's report: ``<safe id>.html``, never the index's.

    The id is made file-name safe (:func:`anchor`); a stem that is reserved
    (:data:`RESERVED_STEMS`: ``index``, ``assets``) gets ``-run``; a stem longer than
    :data:`MAX_STEM` characters keeps its first 80 and a stable digest of the whole id
    (``<80 chars>-<12 hex of sha256>``), so every file system can hold it and two long
    ids stay apart. Distinct ids that still map to one name are told apart by the caller
    (``icore audit`` suffixes ``-2``, ``-3``, ...).
    """
    stem = anchor(run_id)
    if len(stem) > MAX_STEM:
        digest = hashlib.sha256(str(run_id).encode("utf-8", "surrogatepass")).hexdigest()
        stem = f"{stem[:80]}-{digest[:12]}"
    if stem.lower() in RESERVED_STEMS:
        stem = f"{stem}-run"
    return f"{stem}.html"


def _asset(name: str) -> str:
    return resources.files("icore.report").joinpath("assets", name).read_text(
        encoding="utf-8")


def copy_assets(out_dir: Path) -> list[Path]:
    """Copy the bundled assets into ``out_dir/assets`` (idempotent)."""
    dst = out_dir / "assets"
    dst.mkdir(parents=True, exist_ok=True)
    out = []
    root = resources.files("icore.report").joinpath("assets")
    for name in ASSETS:
        data = root.joinpath(name).read_bytes()
        p = dst / name
        if not p.is_file() or p.read_bytes() != data:
            write_owned(p, data)  # never over a file of the user's (issue 29)
        out.append(p)
    return out


def _csp_hash(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"


def _page_context(out: Path, single_file: bool) -> dict[str, object]:
    """Template variables of the page head.

    Inlined assets (with their CSP hashes) or links to ``assets/`` (copied).
    """
    if not single_file:
        copy_assets(out)
        return {"inline": False, "asset_prefix": "assets/",
                "csp": "default-src 'self'; img-src 'self' data:; style-src 'self'; "
                       "script-src 'self'"}
    css, js = _asset("report.css"), _asset("report.js")
    for text, tag in ((css, "</style"), (js, "</script")):
        if tag in text.lower():  # cannot happen with the bundled files; fail loudly
            raise ValueError(f"bundled asset contains {tag}")
    return {"inline": True, "css": css, "js": js, "asset_prefix": "",
            "csp": f"default-src 'none'; img-src data:; style-src {_csp_hash(css)}; "
                   f"script-src {_csp_hash(js)}"}


def _write(path: Path, html: str) -> Path:
    """Write a page; a file there that icore did not write is refused (FileExistsError)."""
    return write_owned(path, html.encode("utf-8"))


def render_report(view: RunView, out_dir: str | Path, *, single_file: bool = True) -> Path:
    """Render one run's report to ``out_dir/<id>.html``.

    Args:
        view: the run's view model (built by :func:`view_from_audit` or by a live run).
        out_dir: output folder (created if missing).
        single_file: inline CSS and JS (default); False copies them to ``assets/``.

    Returns:
        The path of the HTML file.

    Raises:
        FileExistsError: a file is already at the page's (or an asset's) path that icore
            did not write, or that changed since it did (:func:`icore._files.write_owned`,
            issue 29): it is left as it was.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    html = _env().get_template("run.html.j2").render(
        run=view, graph=_layout(view.obligations), plot=_timeline(view.timeline),
        g=_event_graph(view.events), **_page_context(out, single_file))
    return _write(out / report_filename(view.id), html)


def render_live(view: LiveRunView, out_dir: str | Path, *, single_file: bool = True) -> Path:
    """Render a live run's page to ``out_dir/report.html`` (see :func:`render_report`)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    html = _env().get_template("live.html.j2").render(
        live=view, **_page_context(out, single_file))
    return _write(out / "report.html", html)


def render_index(view: IndexView, out_dir: str | Path, *, single_file: bool = True) -> Path:
    """Render the index page to ``out_dir/index.html`` (see :func:`render_report`)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    html = _env().get_template("index.html.j2").render(
        index=view, **_page_context(out, single_file))
    return _write(out / "index.html", html)


__all__ = ["ASSETS", "EVENTS_PER_PAGE", "anchor", "copy_assets", "render_index",
           "render_live", "render_report", "report_filename"]
