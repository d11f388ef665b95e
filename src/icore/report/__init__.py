"""HTML reports that work offline, in one file (design.md 2, ``report/``).

The report layer renders view models and computes nothing. Reuse it for any run:

>>> from icore.report import RunView, render_report
>>> path = render_report(RunView(id="r1", title="My run"), "out")   # doctest: +SKIP

- :class:`RunView` (and its parts) / :class:`IndexView` / :class:`LiveRunView`: the
  view models, plain frozen data.
- :func:`render_report` ``(view, out_dir) -> Path``: ``out_dir/<id>.html``;
  :func:`render_index`: ``out_dir/index.html``; :func:`render_live`:
  ``out_dir/report.html``.
- :func:`view_from_audit` / :func:`index_from_audits`: view models of imported runs
  (:mod:`icore.adapters`); a trace carrying PlanFence records gets lineage pictures
  (:func:`lineage_view`); :func:`state_views`: the obligation, assertion, event and flag
  views of any iCORE state.
- :func:`write_live_report` ``(run_result) -> Path``: a live run's page
  (``report.html``: lineage pictures and gate decisions of every protected action,
  planfence Sec. 3-4) and its iCORE page (``icore-report/<run>.html``), cross-linked.

Pages are one file by default (CSS and JS inlined under a hash-based
Content-Security-Policy, pictures as inline SVG); ``single_file=False`` copies
``assets/report.css`` and ``assets/report.js`` beside them instead. G is drawn as a
graph (agents as lanes, causes as curves) in pages of :data:`EVENTS_PER_PAGE` events.
See docs/audit-real-runs.md, "Reports".
"""

from icore.report._build import (
    flag_views,
    index_from_audits,
    lineage_views,
    state_views,
    trace_lineage,
    view_from_audit,
)
from icore.report._lineage_view import lineage_view, record_views, render_lineage
from icore.report._live_page import (
    ICORE_DIR,
    icore_run_view,
    live_diagnoses,
    live_run_view,
    write_live_report,
)
from icore.report._render import (
    ASSETS,
    EVENTS_PER_PAGE,
    anchor,
    copy_assets,
    render_index,
    render_live,
    render_report,
    report_filename,
)
from icore.report._view_model import (
    AssertionView,
    AttributionView,
    CandidateView,
    CertificateView,
    ChainLinkView,
    DecisionStepView,
    DiagnosisView,
    EventView,
    FlagView,
    IndexRow,
    IndexView,
    LineageView,
    LiveRunView,
    LiveTaskView,
    MetricPointView,
    NoticeView,
    ObligationView,
    RecordView,
    RunView,
    ValidationView,
)

__all__ = [
    "ASSETS",
    "EVENTS_PER_PAGE",
    "ICORE_DIR",
    "AssertionView",
    "AttributionView",
    "CandidateView",
    "CertificateView",
    "ChainLinkView",
    "DecisionStepView",
    "DiagnosisView",
    "EventView",
    "FlagView",
    "IndexRow",
    "IndexView",
    "LineageView",
    "LiveRunView",
    "LiveTaskView",
    "MetricPointView",
    "NoticeView",
    "ObligationView",
    "RecordView",
    "RunView",
    "ValidationView",
    "anchor",
    "copy_assets",
    "flag_views",
    "icore_run_view",
    "index_from_audits",
    "lineage_view",
    "lineage_views",
    "live_diagnoses",
    "live_run_view",
    "record_views",
    "render_index",
    "render_lineage",
    "render_live",
    "render_report",
    "report_filename",
    "state_views",
    "trace_lineage",
    "view_from_audit",
    "write_live_report",
]
