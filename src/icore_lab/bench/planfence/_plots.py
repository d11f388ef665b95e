"""Figures of the PlanFence replay (matplotlib, Agg backend): one PNG per study."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

from icore._extras import require

matplotlib = require("matplotlib", "bench", feature="icore bench planfence plots")
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import Rectangle  # noqa: E402

from icore_lab.bench.planfence._analysis import Agg  # noqa: E402

Aggs = dict[tuple[str, str, str], Agg]


def _by(aggs: Aggs, study: str) -> list[Agg]:
    return [a for (s, _, _), a in aggs.items() if s == study]


def _table1(aggs: Aggs, out: Path) -> str | None:
    rows = _by(aggs, "table1")
    if not rows:
        return None
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 4.5))
    names = [a.policy for a in rows]
    colors = ["#c0392b" if a.invalid else ("#16a085" if a.policy == "planfence" else
                                           "#2c7fb8") for a in rows]
    ax1.barh(names, [a.stall_ms for a in rows], color=colors)
    ax1.set_xlabel("stall ms/action")
    ax2.barh(names, [a.kib for a in rows], color=colors)
    ax2.set_xlabel("traffic KiB/action")
    ax2.set_yticklabels([])
    for ax in (ax1, ax2):
        ax.invert_yaxis()
    fig.suptitle("Table 1 (AT&T, rho=4, 8 keys, N=5, H=64; red = issues invalid actions)")
    fig.tight_layout()
    path = out / "table1.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return str(path)


def _fig3(aggs: Aggs, out: Path) -> str | None:
    rows = _by(aggs, "fig3")
    if not rows:
        return None
    links = sorted({str(a.facets["link"]) for a in rows},
                   key=lambda x: ("loopback", "att", "tmobile", "verizon").index(x)
                   if x in ("loopback", "att", "tmobile", "verizon") else 9)
    rhos = sorted({float(a.facets["rho"]) for a in rows})
    cell: dict[tuple[str, float], dict[str, Agg]] = defaultdict(dict)
    for a in rows:
        cell[(str(a.facets["link"]), float(a.facets["rho"]))][a.policy] = a
    fig, ax = plt.subplots(figsize=(7, 4))
    for i, link in enumerate(links):
        for j, rho in enumerate(rhos):
            d = cell.get((link, rho), {})
            pf = d.get("planfence")
            pro = [x for x in (d.get("metadata_sync_k1"), d.get("centralized_lineage")) if x]
            if pf is None or not pro:
                continue
            best = min(pro, key=lambda a: a.stall_ms)
            lo, hi = sorted((pf.stall_ms, best.stall_ms))
            ratio = hi / lo if lo > 0 else float("inf")
            tie = hi == 0 or (hi - lo) / hi < 0.10
            color = "#bbbbbb" if tie else ("#16a085" if pf.stall_ms < best.stall_ms
                                          else "#2c7fb8")
            label = "tie" if tie else ("PF" if pf.stall_ms < best.stall_ms else
                                       "MS" if best.policy.startswith("metadata") else "CL")
            ax.add_patch(Rectangle((j, i), 1, 1, color=color))
            ax.text(j + 0.5, i + 0.5, f"{label}\n{ratio:.1f}x", ha="center", va="center")
    ax.set_xlim(0, len(rhos))
    ax.set_ylim(0, len(links))
    ax.set_xticks([j + 0.5 for j in range(len(rhos))], [f"{r:g}" for r in rhos])
    ax.set_yticks([i + 0.5 for i in range(len(links))], links)
    ax.set_xlabel("nominal update target rho")
    ax.set_title("Fig. 3: lower-stall safe policy (runner-up/winner ratio)")
    fig.tight_layout()
    path = out / "fig3.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return str(path)


def _fig4(aggs: Aggs, out: Path) -> str | None:
    rows = _by(aggs, "fig4")
    if not rows:
        return None
    fig, ax = plt.subplots(figsize=(7, 4.5))
    rhos = sorted({float(a.facets["rho"]) for a in rows})
    for rho in rhos:
        ms = sorted((a for a in rows if float(a.facets["rho"]) == rho
                     and a.policy.startswith("metadata_sync")),
                    key=lambda a: int(a.policy.rsplit("k", 1)[1]))
        pf = [a for a in rows if float(a.facets["rho"]) == rho and a.policy == "planfence"]
        line = ax.plot([a.stall_ms for a in ms], [a.invalid / a.actions * 100 for a in ms],
                       "o-", label=f"metadata sync, rho={rho:g}")
        for a in ms:
            ax.annotate(a.policy.rsplit("k", 1)[1], (a.stall_ms, a.invalid / a.actions * 100),
                        fontsize=7)
        if pf:
            ax.plot([pf[0].stall_ms], [0], "s", color=line[0].get_color(), markersize=9,
                    markerfacecolor="none")
    ax.set_xscale("log")
    ax.set_xlabel("stall ms/action (squares: PlanFence)")
    ax.set_ylabel("invalid actions (%)")
    ax.set_title("Fig. 4: metadata-sync cadence K on AT&T")
    ax.legend(fontsize=7)
    fig.tight_layout()
    path = out / "fig4.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return str(path)


def _fig5(aggs: Aggs, out: Path) -> str | None:
    rows = _by(aggs, "fig5")
    if not rows:
        return None
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 4.5))
    series: dict[tuple[str, str], list[tuple[int, Agg]]] = defaultdict(list)
    for a in rows:
        net = f"{a.facets['link']}@{float(a.facets.get('offset_s', 0)):g}s"
        series[(a.policy, net)].append((int(a.facets["keys"]), a))
    # colour = policy, line style and marker = network, so each pair reads at a glance
    colours = {"planfence": "#16a085", "batched_all_key": "#2e7fbf",
               "per_key_all_key": "#8e44ad"}
    nets = sorted({net for _, net in series}, key=lambda n: (not n.startswith("loop"), n))
    looks = dict(zip(nets, [("-", "o"), ("--", "s"), ("-.", "^"), (":", "D"), ("-", "v")],
                     strict=False))
    for (pol, net), pts in sorted(series.items()):
        pts.sort(key=lambda x: x[0])
        ls, mk = looks.get(net, ("-", "o"))
        kw = {"color": colours.get(pol, "#7f8c8d"), "linestyle": ls, "marker": mk,
              "label": f"{pol.replace('_', ' ')}, {net}"}
        ax1.plot([k for k, _ in pts], [a.stall_ms for _, a in pts], **kw)
        ax2.plot([k for k, _ in pts], [a.kib for _, a in pts], **kw)
    for ax, yl in ((ax1, "stall ms/action (log)"), (ax2, "traffic KiB/action (log)")):
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("shared keys |X|")
        ax.set_ylabel(yl)
        ax.grid(alpha=0.3, which="both")
    ax2.legend(fontsize=7, loc="upper left", ncol=1)
    fig.suptitle("Fig. 5: dependency scope vs all-key validation")
    fig.tight_layout()
    path = out / "fig5.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return str(path)


def _fig6(aggs: Aggs, out: Path) -> str | None:
    rows = _by(aggs, "fig6")
    if not rows:
        return None
    om = sorted((float(a.facets["omit_prob"]), a) for a in rows
                if a.facets.get("case") == "omission")
    ov = sorted((int(a.facets["overdeclare"]), a) for a in rows
                if a.facets.get("case") == "overdeclare")
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 4))
    ax1.plot([p * 100 for p, _ in om], [a.invalid / a.actions * 100 for _, a in om], "o-")
    ax1.plot([p * 100 for p, _ in om], [75 * p for p, _ in om], ":", label="3/4 x p")
    ax1.set_xlabel("omission probability (%)")
    ax1.set_ylabel("invalid issued actions (%)")
    ax1.legend()
    ax2.plot([4 + x for x, _ in ov], [a.heads_per_validation for _, a in ov], "o-")
    ax2.set_xlabel("declared keys")
    ax2.set_ylabel("owner-head checks per validation")
    fig.suptitle("Fig. 6: omission breaks safety; over-declaration costs checks")
    fig.tight_layout()
    path = out / "fig6.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return str(path)


def _sweep(aggs: Aggs, out: Path, study: str, facet: str, title: str) -> str | None:
    rows = _by(aggs, study)
    if not rows:
        return None
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 4))
    pols = sorted({a.policy for a in rows})
    for pol in pols:
        pts = sorted((float(a.facets[facet]), a) for a in rows if a.policy == pol)
        ax1.plot([x for x, _ in pts], [a.stall_ms for _, a in pts], "o-", label=pol)
        ax2.plot([x for x, _ in pts], [a.kib for _, a in pts], "o-", label=pol)
    ax1.set_xlabel(facet)
    ax2.set_xlabel(facet)
    ax1.set_ylabel("stall ms/action")
    ax2.set_ylabel("KiB/action")
    ax2.legend(fontsize=7)
    fig.suptitle(title)
    fig.tight_layout()
    path = out / f"{study}.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return str(path)


def plot_all(aggs: Aggs, out: Path) -> list[str]:
    """Write every figure the run's studies support; return their paths."""
    paths = [_table1(aggs, out), _fig3(aggs, out), _fig4(aggs, out), _fig5(aggs, out),
             _fig6(aggs, out),
             _sweep(aggs, out, "table5", "agents", "Table 5: team size (AT&T, rho=4)"),
             _sweep(aggs, out, "table6", "deps", "Table 6: dependency count (|X|=8)"),
             _sweep(aggs, out, "table7", "work_units", "Table 7: episode length")]
    return [p for p in paths if p is not None]


__all__ = ["plot_all"]
