"""HTML audit reports that work offline (design.md 2, ``report/``).

The report layer renders view models and computes nothing. Reuse it for any run:

>>> from icore.report import RunView, render_report
>>> path = render_report(RunView(id="r1", title="My run"), "out")   # doctest: +SKIP

- :class:`RunView` (and its parts) / :class:`IndexView`: the view model, plain frozen data.
- :func:`render_report` ``(view, out_dir) -> Path``: ``out_dir/<id>.html``.
- :func:`render_index` ``(view, out_dir) -> Path``: ``out_dir/index.html``.
- :func:`view_from_audit` / :func:`index_from_audits`: view models of imported runs
  (:mod:`icore.adapters`); :func:`state_views`: the obligation, assertion, event and flag
  views of any iCORE state (live runs).

Pages reference only the bundled ``assets/report.css`` and ``assets/report.js`` (copied
to ``out_dir/assets``); plots and the obligation graph are inline SVG. See
docs/audit-real-runs.md, "Reports".
"""

from icore.report._build import index_from_audits, state_views, view_from_audit
from icore.report._model import (
    AssertionView,
    AttributionView,
    CandidateView,
    CertificateView,
    ChainLinkView,
    DiagnosisView,
    EventView,
    FlagView,
    IndexRow,
    IndexView,
    MetricPointView,
    ObligationView,
    RunView,
)
from icore.report._render import (
    ASSETS,
    anchor,
    copy_assets,
    render_index,
    render_report,
    report_filename,
)

__all__ = [
    "ASSETS",
    "AssertionView",
    "AttributionView",
    "CandidateView",
    "CertificateView",
    "ChainLinkView",
    "DiagnosisView",
    "EventView",
    "FlagView",
    "IndexRow",
    "IndexView",
    "MetricPointView",
    "ObligationView",
    "RunView",
    "anchor",
    "copy_assets",
    "index_from_audits",
    "render_index",
    "render_report",
    "report_filename",
    "state_views",
    "view_from_audit",
]
