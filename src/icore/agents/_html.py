"""A self-contained HTML report of a live run (works offline: no scripts, no fetches).

Renders a :class:`~icore.agents.RunResult`; computes nothing beyond formatting. The
``icore`` CLI additionally renders through :mod:`icore.report` when that is available.
"""

from __future__ import annotations

import html
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from icore.agents._live import RunResult

_CSS = """
body{font-family:system-ui,sans-serif;margin:2em;color:#222;max-width:1200px}
table{border-collapse:collapse;margin:1em 0;font-size:13px}
td,th{border:1px solid #ccc;padding:4px 8px;text-align:left;vertical-align:top}
th{background:#f3f3f3} .ok{color:#176d2c;font-weight:600} .bad{color:#b00020;font-weight:600}
.crash{background:#fff0f0;border:1px solid #e99;padding:.5em 1em;margin:1em 0}
pre{background:#f7f7f7;padding:.5em;overflow:auto;font-size:12px}
details{margin:.3em 0}
"""


_GATE_HEAD = ["point", "outcome", "reason", "replanned", "policy", "detail"]


def _e(v: Any) -> str:
    return html.escape(str(v))


def _table(head: Sequence[str], rows: Sequence[Sequence[Any]], raw: bool = False) -> str:
    h = "".join(f"<th>{_e(c)}</th>" for c in head)
    body = "".join("<tr>" + "".join(f"<td>{c if raw else _e(c)}</td>" for c in r) + "</tr>"
                   for r in rows)
    return f"<table><tr>{h}</tr>{body}</table>"


def _flag(ok: bool, yes: str = "yes", no: str = "no") -> str:
    return f'<span class="{"ok" if ok else "bad"}">{_e(yes if ok else no)}</span>'


def render_run_html(res: RunResult, verdicts: Sequence[Mapping[str, Any]] = ()) -> str:
    """Return the report HTML of one run."""
    s = res.summary()
    parts = [f"<!doctype html><html><head><meta charset='utf-8'><title>icore run "
             f"{_e(res.name)}</title><style>{_CSS}</style></head><body>",
             f"<h1>icore run: {_e(res.name)}</h1>",
             f"<p>policy <b>{_e(res.policy)}</b> · family <b>{_e(res.family)}</b> · backend "
             f"<b>{_e(res.backend)}</b> · {len(res.tasks)} workflow(s) · "
             f"{res.duration_s:.2f} s</p>"]
    if res.interrupted:
        parts.append("<div class='crash'><b>Interrupted</b> (Ctrl-C): every agent process "
                     "was stopped; results below cover the workflows that finished.</div>")
    if res.error:
        parts.append(f"<div class='crash'><b>Run error:</b> {_e(res.error)}</div>")
    for c in res.crashes:
        parts.append(
            f"<div class='crash'><b>Agent crash:</b> {_e(c.get('agent'))} "
            f"({_e(c.get('role'))}) exited with code {_e(c.get('returncode'))}"
            f"{' (injected fault)' if c.get('injected') else ''}. Actions depending on it "
            f"fail closed.<details><summary>log tail</summary><pre>{_e(c.get('tail', ''))}"
            f"</pre></details></div>")
    parts.append("<h2>Summary</h2>")
    parts.append(_table(["metric", "value"], [
        ["task success", f"{s['succeeded']}/{s['tasks']}"],
        ["invalid primary actions", f"{s['invalid_actions']}/{s['tasks']}"],
        ["successful replans", s["successful_replans"]],
        ["blocked actions (fail closed)", s["blocked"]],
        ["redundant auditor actions", s["redundant_auditor_actions"]],
        ["accepted / total responses", f"{s['accepted']}/{s['responses']}"],
        ["agent crashes", s["crashes"]],
        ["committed records verified after shutdown",
         f"{s['records_checked']} checked, {s['records_lost']} lost"],
        ["agent processes left running", s["processes_left"]],
    ]))
    ic = res.icore
    if ic:
        parts.append("<h2>iCORE audit</h2>")
        parts.append(_table(["snd", "astab", "cq", "events", "proposals", "committed",
                             "rejected", "hard flags", "open flags"],
                            [[f"{ic.get('snd', 0):.3f}", f"{ic.get('astab', 0):.3f}",
                              f"{ic.get('cq', 0):.3f}", ic.get("events"), ic.get("proposals"),
                              ic.get("committed"), ic.get("rejected"), ic.get("hard_flags"),
                              ic.get("open_flags")]]))
    parts.append("<h2>Workflows</h2>")
    rows = []
    for t in res.tasks:
        rows.append([_e(t.task), _flag(t.success), _flag(not t.invalid, "valid", "INVALID")
                     if t.executed else "not issued", _e(t.replanned),
                     _e(t.block_reason or "-"), _e(t.audit_verdict or "-"),
                     f"{t.accepted}/{t.responses}", _e(t.error or "-"),
                     f"{t.duration_ms:.0f}"])
    parts.append(_table(["task", "success", "primary action", "replanned", "blocked reason",
                         "auditor", "accepted/responses", "error", "ms"], rows, raw=True))
    parts.append("<h2>Details</h2>")
    for t in res.tasks:
        gate_rows = [[d.get("point"), d.get("outcome"), d.get("reason"), d.get("replanned"),
                      d.get("policy"), str(d.get("detail", ""))[:200]] for d in t.gate]
        step_rows = [[x.get("step"), x.get("agent"), x.get("ok"), x.get("ms"),
                      str(x.get("detail", ""))[:200]] for x in t.steps]
        ic_rows = [[v.get("operation"), v.get("proposer"), v.get("decision"),
                    "; ".join(v.get("reasons", []))[:300]] for v in t.icore]
        parts.append(f"<details><summary>{_e(t.task)}</summary>"
                     f"<h4>steps</h4>{_table(['step', 'agent', 'ok', 'ms', 'detail'], step_rows)}"
                     f"<h4>gate decisions</h4>"
                     f"{_table(_GATE_HEAD, gate_rows)}"
                     f"<h4>iCORE proposals</h4>"
                     f"{_table(['operation', 'proposer', 'decision', 'reasons'], ic_rows)}"
                     f"</details>")
    parts.append(f"<h2>Files</h2><p>run folder: <code>{_e(res.out_dir)}</code> — "
                 "<code>run.json</code>, <code>icore.sqlite</code> (iCORE event log), "
                 "<code>agents/*.sqlite</code> (per-agent memories), <code>team.yaml</code> "
                 "(the net team manifest), <code>logs/</code>.</p>")
    parts.append("<details><summary>summary JSON</summary><pre>"
                 f"{_e(json.dumps(s, indent=1, default=str))}</pre></details>")
    parts.append("</body></html>")
    return "\n".join(parts)


def write_run_report(res: RunResult, verdicts: Sequence[Mapping[str, Any]] = ()) -> Path:
    """Write ``report.html`` into the run folder; return its path."""
    path = Path(res.out_dir) / "report.html"
    path.write_text(render_run_html(res, verdicts), encoding="utf-8")
    return path
