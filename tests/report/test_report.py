"""HTML reports: rendered offline, referencing only bundled assets (no browser needed)."""

from __future__ import annotations

import base64
import hashlib
import html as htmllib
import re
from html.parser import HTMLParser
from importlib import resources
from pathlib import Path
from typing import Any

import pytest

from icore.adapters import audit_trace, parse_captain_agent, parse_magentic_one
from icore.attribution import attribute
from icore.report import (
    ASSETS,
    IndexRow,
    IndexView,
    MetricPointView,
    ObligationView,
    RunView,
    index_from_audits,
    render_index,
    render_report,
    view_from_audit,
)


class _Refs(HTMLParser):
    """Collects every URL-bearing attribute and every element id."""

    def __init__(self) -> None:
        super().__init__()
        self.refs: list[str] = []
        self.ids: set[str] = set()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for k, v in attrs:
            if v is None:
                continue
            if k in ("src", "href", "xlink:href", "action", "poster", "data"):
                self.refs.append(v)
            if k == "id":
                self.ids.add(v)
            if k == "style" and "url(" in v:
                self.refs.append(v)


def check_only_bundled(page: Path) -> _Refs:
    """Assert the page references only bundled assets or in-page/sibling files."""
    html = page.read_text(encoding="utf-8")
    p = _Refs()
    p.feed(html)
    bundled = {f"assets/{a}" for a in ASSETS}
    for ref in p.refs:
        assert not re.match(r"^[a-z][a-z0-9+.-]*:", ref, re.IGNORECASE), ref  # no scheme
        assert not ref.startswith("//"), ref
        if ref.startswith("#"):
            assert ref[1:] in p.ids, f"dangling anchor {ref}"
            continue
        target = ref.split("#")[0]
        assert target in bundled or (page.parent / target).exists(), ref
    assert "@import" not in html
    for name in ASSETS:
        text = resources.files("icore.report").joinpath("assets", name).read_text(
            encoding="utf-8")
        assert not re.search(r"https?://|url\(\s*['\"]?//|@import", text), name
    return p


def check_single_file(page: Path) -> None:
    """One file: the CSS and JS are inlined, byte for byte, and the CSP names their
    SHA-256 hashes (nothing else may run or style the page); no assets/ beside it."""
    html = page.read_text(encoding="utf-8")
    assert 'href="assets/' not in html and 'src="assets/' not in html
    csp = re.search(r'http-equiv="Content-Security-Policy" content="([^"]+)"', html)
    assert csp is not None
    policy = htmllib.unescape(csp.group(1))
    assert "default-src 'none'" in policy
    for tag, name in (("style", "report.css"), ("script", "report.js")):
        body = re.search(rf"<{tag}>(.*?)</{tag}>", html, re.DOTALL)
        assert body is not None, tag
        text = resources.files("icore.report").joinpath("assets", name).read_text(
            encoding="utf-8")
        assert body.group(1) == text
        digest = base64.b64encode(hashlib.sha256(text.encode()).digest()).decode()
        assert f"'sha256-{digest}'" in policy
    assert not (page.parent / "assets").exists()


def test_minimal_view(tmp_path: Path) -> None:
    """A hand-built view renders (the API issue 8 reuses); the graph element is present."""
    view = RunView(
        id="live/1", title="Live run",
        timeline=(MetricPointView(0, 1.0, 0.5, 0.75), MetricPointView(1, 0.5, 1.0, 0.75)),
        obligations=(ObligationView("root", "task", "active", "a", None, 1.0, True, True),
                     ObligationView("w1", "code", "assigned", "b", "root", 1.0, False, False,
                                    relations=(("transported_to", "root"),))),
    )
    page = render_report(view, tmp_path)
    assert page.name == "live-1.html"
    html = page.read_text(encoding="utf-8")
    assert 'id="obligation-graph"' in html and 'id="cq-timeline"' in html
    assert 'data-obligation="w1"' in html
    check_only_bundled(page)
    check_single_file(page)


def test_assets_mode(tmp_path: Path) -> None:
    """``single_file=False`` links the assets and copies them beside the page."""
    page = render_report(RunView(id="r", title="t"), tmp_path, single_file=False)
    html = page.read_text(encoding="utf-8")
    assert 'href="assets/report.css"' in html and 'src="assets/report.js"' in html
    assert "<style>" not in html
    check_only_bundled(page)
    assert (tmp_path / "assets" / "report.js").is_file()


def test_escaping(tmp_path: Path) -> None:
    """Recorded text is escaped, never interpreted."""
    view = RunView(id="x", title="<script>alert(1)</script>", subtitle="<img src=http://e/x>")
    html = render_report(view, tmp_path).read_text(encoding="utf-8")
    assert "<script>alert" not in html and "&lt;script&gt;" in html
    assert "<img src=http" not in html


@pytest.mark.parametrize("family", ["magentic", "captain"])
def test_audit_report(family: str, magentic: dict[str, Any], captain: dict[str, Any],
                      tmp_path: Path) -> None:
    """A real-shaped audit renders every section; diagnoses link to the events they cite."""
    t = parse_magentic_one(magentic) if family == "magentic" else parse_captain_agent(captain)
    r = audit_trace(t)
    view = view_from_audit(r, attribution=attribute(r), links=(("PROV-JSON", "run.prov.json"),))
    (tmp_path / "run.prov.json").write_text("{}", encoding="utf-8")
    page = render_report(view, tmp_path)
    refs = check_only_bundled(page)
    for d in r.diagnoses:
        assert f"dg-{d.id}" in refs.ids
        for e in d.events:
            assert f"#ev-{e.replace('.', '-')}" in refs.refs
    for section in ("summary", "attribution", "timeline", "graph", "diagnoses", "assertions",
                    "events", "obligation-graph", "cq-timeline"):
        assert section in refs.ids
    html = page.read_text(encoding="utf-8")
    assert "output_evidence" in html  # certificates behind assertions


def test_index(magentic: dict[str, Any], tmp_path: Path) -> None:
    """The index links every run's report and lists errors."""
    r = audit_trace(parse_magentic_one(magentic))
    render_report(view_from_audit(r), tmp_path)
    idx = render_index(index_from_audits([r], errors=(("bad.json", "history: missing"),),
                                          elapsed_s=0.1), tmp_path)
    refs = check_only_bundled(idx)
    assert "run.html" in refs.refs
    assert "bad.json" in idx.read_text(encoding="utf-8")
    plain = render_index(IndexView("t", ("run",), (IndexRow("a", "a.html", ()),)), tmp_path)
    assert plain.exists()


def test_templates_compiled_once_for_many_reports(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """Reports of many runs (a Collector file of 3,000 traces) compile each template
    once per process, not once per report."""
    import jinja2

    compiled: list[str | None] = []
    real = jinja2.Environment.compile

    def counting(self: jinja2.Environment, source: Any, name: str | None = None,
                 *args: Any, **kwargs: Any) -> Any:
        compiled.append(name)
        return real(self, source, name, *args, **kwargs)

    monkeypatch.setattr(jinja2.Environment, "compile", counting)
    for i in range(4):
        render_report(RunView(id=f"r{i}", title="t"), tmp_path)
    assert compiled.count("run.html.j2") <= 1
