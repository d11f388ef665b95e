"""Reports rendered in a real browser: headless Chromium (Debian's ``chromium`` package).

The browser is driven over the DevTools protocol on a pipe (``--remote-debugging-pipe``,
no network port, no extra Python package): each page is loaded from its file, must
become ready (``data-report-ready`` set by the bundled script) with no console error,
no uncaught exception and no CSP violation, and must show its lineage and graph
elements. Screenshots (whole page and key parts) are saved under
``results/browser/`` for people to look at.

``make test-browser`` installs Chromium (``apt-get install chromium``) and runs this
group; ``make test`` runs it. Without Chromium (and without root/apt to install it)
the group skips and says how to install it.
"""

from __future__ import annotations

import base64
import fcntl
import json
import os
import select
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from icore._files import WRITTEN
from icore.adapters import audit_trace, parse_jsonl, parse_magentic_one
from icore.attribution import attribute
from icore.live import default_manifest, run_live
from icore.report import (
    EventView,
    RunView,
    index_from_audits,
    render_index,
    render_report,
    view_from_audit,
    write_live_report,
)

FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--hide-scrollbars", "--mute-audio")
_NAMES = ("chromium", "chromium-browser")
REPO = Path(__file__).resolve().parents[2]
SHOTS = Path(os.environ.get("ICORE_SCREENSHOTS", REPO / "results" / "browser"))


def _find() -> str | None:
    for name in _NAMES:
        exe = shutil.which(name)
        if exe:
            return exe
    return None


def _apt(*args: str, timeout_s: float) -> tuple[bool, str]:
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    try:
        proc = subprocess.run(["apt-get", *args], env=env, capture_output=True, text=True,
                              timeout=timeout_s, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return False, str(exc)
    return proc.returncode == 0, (proc.stderr or proc.stdout)[-300:]


def ensure_chromium() -> str:
    """Find Chromium, installing Debian's package when possible; else skip with the reason."""
    exe = _find()
    if exe is not None:
        return exe
    if not hasattr(os, "geteuid") or os.geteuid() != 0 or shutil.which("apt-get") is None:
        pytest.skip("headless Chromium not found and cannot install it (needs root and "
                    "apt-get); install Debian's package: apt-get install -y chromium "
                    "(or run make test-browser)")
    ok, why = _apt("install", "-y", "-q", "--no-install-recommends", "chromium",
                   timeout_s=400)
    if not ok:  # package lists may be missing or stale
        _apt("update", "-q", timeout_s=200)
        ok, why = _apt("install", "-y", "-q", "--no-install-recommends", "chromium",
                       timeout_s=400)
    exe = _find()
    if exe is None:
        pytest.skip(f"could not install Chromium with apt-get install -y chromium: {why}")
    return exe


class Browser:
    """A headless Chromium driven over the DevTools protocol on a pipe.

    Messages are JSON objects separated by NUL bytes on the child's fds 3 (commands in)
    and 4 (replies and events out). Every wait is bounded by ``timeout_s``.
    """

    def __init__(self, exe: str, profile: Path, *, timeout_s: float = 60.0) -> None:
        self.timeout_s = timeout_s
        cmd_r, self._cmd_w = os.pipe()
        self._out_r, out_w = os.pipe()

        def child_fds() -> None:  # runs in the child before exec
            # copy both ends above 10 first, so neither dup2 can clobber the other
            hi_r = fcntl.fcntl(cmd_r, fcntl.F_DUPFD, 10)
            hi_w = fcntl.fcntl(out_w, fcntl.F_DUPFD, 10)
            os.dup2(hi_r, 3)
            os.dup2(hi_w, 4)
            os.set_inheritable(3, True)
            os.set_inheritable(4, True)

        self.log = open(profile / "chromium.log", "wb")
        # close_fds=False keeps the child's fds 3 and 4 that child_fds set up; every
        # other descriptor of this process is non-inheritable (PEP 446)
        self.proc = subprocess.Popen(
            [exe, *FLAGS, "--remote-debugging-pipe", f"--user-data-dir={profile}",
             "--window-size=1400,1000", "about:blank"],
            stdin=subprocess.DEVNULL, stdout=self.log, stderr=self.log,
            preexec_fn=child_fds, close_fds=False)
        os.close(cmd_r)
        os.close(out_w)
        self._buf = b""
        self._id = 0
        self.session = ""
        self.events: list[dict[str, Any]] = []
        try:
            target = self.call("Target.createTarget", url="about:blank")["targetId"]
            self.session = self.call("Target.attachToTarget", targetId=target,
                                     flatten=True)["sessionId"]
            for domain in ("Page", "Runtime", "Log"):
                self.call(f"{domain}.enable", session=True)
        except BaseException:
            self.close()
            raise

    def _read(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("no DevTools message from Chromium in time")
            ready, _, _ = select.select([self._out_r], [], [], left)
            if ready:
                chunk = os.read(self._out_r, 1 << 20)
                if not chunk:
                    raise RuntimeError("Chromium closed the DevTools pipe")
                self._buf += chunk
        msg, self._buf = self._buf.split(b"\0", 1)
        out: dict[str, Any] = json.loads(msg)
        return out

    def call(self, method: str, *, session: bool = False, **params: Any) -> dict[str, Any]:
        """Send one command and return its result (events meanwhile are kept)."""
        self._id += 1
        msg: dict[str, Any] = {"id": self._id, "method": method, "params": params}
        if session:
            msg["sessionId"] = self.session
        os.write(self._cmd_w, json.dumps(msg).encode() + b"\0")
        deadline = time.monotonic() + self.timeout_s
        while True:
            m = self._read(deadline)
            if m.get("id") == self._id:
                if "error" in m:
                    raise RuntimeError(f"{method}: {m['error']}")
                result: dict[str, Any] = m.get("result", {})
                return result
            self.events.append(m)

    def wait_event(self, method: str) -> None:
        """Wait for an event (already received ones count)."""
        deadline = time.monotonic() + self.timeout_s
        while not any(e.get("method") == method for e in self.events):
            self.events.append(self._read(deadline))

    def eval(self, expr: str) -> Any:
        """Evaluate a JavaScript expression in the page; return its JSON value."""
        r = self.call("Runtime.evaluate", session=True, expression=expr, returnByValue=True)
        if "exceptionDetails" in r:
            raise RuntimeError(f"{expr}: {r['exceptionDetails']}")
        return r["result"].get("value")

    def open(self, page: Path) -> None:
        """Load a page from its file and wait until the bundled script marked it ready."""
        self.events.clear()
        self.call("Page.navigate", session=True, url=page.resolve().as_uri())
        self.wait_event("Page.loadEventFired")
        deadline = time.monotonic() + self.timeout_s
        while self.eval("document.documentElement.getAttribute('data-report-ready')") != "1":
            if time.monotonic() > deadline:
                raise TimeoutError(f"{page.name} never became ready")
            time.sleep(0.05)

    def problems(self) -> list[str]:
        """Console errors, uncaught exceptions and error log entries (CSP included)."""
        out = []
        for e in self.events:
            m, p = e.get("method"), e.get("params", {})
            if m == "Runtime.exceptionThrown":
                out.append(f"exception: {p['exceptionDetails'].get('text')}")
            elif m == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
                out.append(f"console.{p['type']}: {p.get('args')}")
            elif m == "Log.entryAdded" and p["entry"].get("level") == "error":
                out.append(f"log ({p['entry'].get('source')}): {p['entry'].get('text')}")
        return out

    def screenshot(self, path: Path, selector: str | None = None) -> Path:
        """Save a PNG of the whole page, or of the first element matching ``selector``."""
        params: dict[str, Any] = {"format": "png", "captureBeyondViewport": True}
        if selector is not None:
            box = self.eval(
                f"(function(){{var e=document.querySelector({json.dumps(selector)});"
                "if(!e)return null;var r=e.getBoundingClientRect();"
                "return [r.left+window.scrollX,r.top+window.scrollY,r.width,r.height];})()")
            assert box is not None, f"no element {selector}"
            params["clip"] = {"x": box[0], "y": box[1], "width": max(box[2], 1),
                              "height": max(box[3], 1), "scale": 1}
        else:
            w, h = self.eval("[document.documentElement.scrollWidth,"
                             "document.documentElement.scrollHeight]")
            params["clip"] = {"x": 0, "y": 0, "width": w, "height": min(h, 6000),
                              "scale": 1}
        data = self.call("Page.captureScreenshot", session=True, **params)["data"]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(data))
        return path

    def close(self) -> None:
        """Close the browser and reap the process (bounded)."""
        try:
            self.call("Browser.close")
        except (RuntimeError, TimeoutError, OSError):
            pass
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=15)
        finally:
            self.log.close()
            for fd in (self._cmd_w, self._out_r):
                os.close(fd)


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    """One headless Chromium (installed from Debian's packages if needed, or skip)."""
    exe = ensure_chromium()
    with tempfile.TemporaryDirectory(prefix="icore-chromium-") as profile:
        b = Browser(exe, Path(profile))
        try:
            yield b
        finally:
            b.close()


def _shot(b: Browser, name: str, selector: str | None = None) -> Path:
    p = b.screenshot(SHOTS / f"{name}.png", selector)
    assert p.stat().st_size > 1000
    return p


def test_skip_message_without_root(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without Chromium, root or apt-get the browser test skips and says how to install."""
    monkeypatch.setattr(shutil, "which", lambda name: None)
    with pytest.raises(pytest.skip.Exception, match="apt-get install -y chromium"):
        ensure_chromium()


def test_install_failure_skips(monkeypatch: pytest.MonkeyPatch) -> None:
    """A failing apt-get (no network, no lists) skips with apt's message, after one update."""
    calls: list[tuple[str, ...]] = []

    def fake_apt(*args: str, timeout_s: float) -> tuple[bool, str]:
        calls.append(args)
        return False, "E: Unable to locate package chromium"

    monkeypatch.setattr(shutil, "which", lambda name: "/usr/bin/apt-get"
                        if name == "apt-get" else None)
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    monkeypatch.setitem(globals(), "_apt", fake_apt)
    with pytest.raises(pytest.skip.Exception, match="Unable to locate package"):
        ensure_chromium()
    assert [c[0] for c in calls] == ["install", "update", "install"]


@pytest.mark.browser
def test_console_errors_are_caught(browser: Browser, tmp_path: Path) -> None:
    """The checker itself: a page whose script throws and whose inline script the CSP
    blocks reports both (so a clean report is evidence, not silence)."""
    page = tmp_path / "bad.html"
    page.write_text(
        "<!DOCTYPE html><html><head><meta http-equiv='Content-Security-Policy' "
        "content=\"script-src 'sha256-AAAA'\"><script>var x = 1;</script></head><body>"
        "<img src='data:,' onerror='throw new Error(1)'></body></html>", encoding="utf-8")
    browser.events.clear()
    browser.call("Page.navigate", session=True, url=page.as_uri())
    browser.wait_event("Page.loadEventFired")
    time.sleep(0.3)
    browser.call("Runtime.evaluate", session=True, expression="null")  # drain events
    assert any("Content Security Policy" in p for p in browser.problems()), \
        browser.problems()


@pytest.mark.browser
@pytest.mark.slow
@pytest.mark.timeout(300)
def test_live_run_pages_in_chromium(browser: Browser, tmp_path: Path) -> None:
    """A live owner-head-freshness run: the run page shows the reason at the top, the
    lineage picture (stale plan, the revision, F(x) vs H(x)) and the gate timeline, links
    the iCORE page, which shows G as a graph; one file each, no console errors."""
    run_dir = tmp_path / "run"
    res = run_live(default_manifest("reservation"), run_dir, policy="owner_head_freshness",
                   reporter=write_live_report)
    assert res.report is not None
    assert not (run_dir / "assets").exists()  # one file: nothing beside it
    browser.open(res.report)
    assert browser.problems() == []
    found = browser.eval("""({
        notice: document.querySelector('#notices .notice-bad') ?
                document.querySelector('#notices .notice-bad').textContent : '',
        lineage: document.querySelectorAll('article.lineage').length,
        records: document.querySelectorAll('svg.lineage-graph g.rec').length,
        stale: document.querySelectorAll('svg.lineage-graph g.stale-rev').length,
        stalePlan: document.querySelectorAll('svg.lineage-graph g.stale-plan').length,
        steps: Array.from(document.querySelectorAll('ol.decisions li'))
                    .map(function (li) { return li.textContent; }),
        staleRows: document.querySelectorAll('table.points tr.stale').length,
        icore: document.getElementById('icore-link').getAttribute('href'),
        flags: Array.from(document.querySelectorAll('table.flags tbody tr'))
                    .map(function (tr) { return tr.cells[3].textContent; }),
        diagnoses: document.querySelectorAll('table.diagnoses tbody tr').length,
        stylesheets: document.styleSheets.length
    })""")
    assert found["notice"].startswith("reservation-00: INVALID"), found
    assert "owner's head is seq 2" in found["notice"], found
    assert found["lineage"] == 1 and found["records"] >= 6
    assert found["stale"] == 1 and found["stalePlan"] == 1 and found["staleRows"] == 1
    assert found["steps"][0].startswith("validate #1: authorized / not_validated")
    assert found["steps"][-1].startswith("authorized")
    assert all(found["flags"]) and found["diagnoses"] == len(found["flags"]) == 2
    assert found["stylesheets"] == 1  # the inlined CSS applied
    _shot(browser, "live-run-page")
    _shot(browser, "live-run-lineage", "article.lineage")
    icore_page = (res.report.parent / found["icore"]).resolve()
    browser.open(icore_page)
    assert browser.problems() == []
    g = browser.eval("""({
        events: document.querySelectorAll('svg.g-page .gev').length,
        lanes: document.querySelectorAll('svg.g-page .lane-label').length,
        edges: document.querySelectorAll('svg.g-page path.cause').length,
        back: document.querySelector('header a.navlink').getAttribute('href'),
        lineage: document.querySelectorAll('article.lineage').length
    })""")
    assert g["events"] == len(res.state.events) and g["lanes"] >= 5 and g["edges"] > 0
    assert g["back"] == "../report.html" and g["lineage"] == 1
    _shot(browser, "live-icore-page")
    _shot(browser, "live-icore-g", "#g-graph")


@pytest.mark.browser
def test_audit_report_in_chromium(browser: Browser, magentic: dict[str, Any],
                                  tmp_path: Path) -> None:
    """The audit report loads offline in one file, its script runs, the obligation graph
    and G's graph are in the DOM, and the index links it."""
    r = audit_trace(parse_magentic_one(magentic))
    out = tmp_path / "out"
    page = render_report(view_from_audit(r, attribution=attribute(r), index_href="index.html"),
                         out)
    render_index(index_from_audits([r]), out)
    # the pages, and the ledger of what icore wrote there (it never overwrites other files)
    assert sorted(p.name for p in out.iterdir()) == sorted([page.name, "index.html", WRITTEN])
    browser.open(page)
    assert browser.problems() == []
    n = browser.eval("""[document.querySelectorAll('#obligation-graph .node').length,
                         document.querySelectorAll('svg.g-page .gev').length]""")
    assert n == [len(r.state.obligations), len(r.state.events)]
    _shot(browser, "audit-report")
    browser.open(out / "index.html")
    assert browser.problems() == []


@pytest.mark.browser
def test_trace_with_planfence_records_shows_lineage(browser: Browser, tmp_path: Path) -> None:
    """A JSONL trace that carries PlanFence records gets the same lineage view."""
    r0, r1, plan, act = ("a" * 64), ("b" * 64), ("c" * 64), ("d" * 64)
    lines = [
        {"run": {"id": "pf", "agents": {"planner": "plans", "executor": "acts"}}},
        {"agent": "user", "kind": "task", "content": "book a hotel"},
        {"planfence": {"record": {"id": r0, "key": "req/t", "owner": "user", "seq": 1,
                                  "type": "requirement", "parents": []}}},
        {"agent": "planner", "kind": "plan", "content": "book H6"},
        {"planfence": {"record": {"id": plan, "key": "plan/t", "owner": "planner", "seq": 1,
                                  "type": "plan", "parents": [r0], "role": "plan"}}},
        {"planfence": {"record": {"id": r1, "key": "req/t", "owner": "user", "seq": 2,
                                  "type": "requirement", "parents": [r0],
                                  "role": "revision"}}},
        {"planfence": {"decision": {"task": "t", "action": "book", "outcome": "authorized",
                                    "reason": "not_validated", "roots": [plan],
                                    "deps": ["req/t"], "frontier": {},
                                    "heads": {"req/t": r1}, "point": 1,
                                    "policy": "owner_head_freshness"}}},
        {"planfence": {"record": {"id": act, "key": "act/t", "owner": "executor", "seq": 1,
                                  "type": "action", "parents": [plan], "role": "action"}}},
        {"agent": "executor", "kind": "output", "content": "booked H6"},
    ]
    trace = parse_jsonl("\n".join(json.dumps(x) for x in lines), run_id="pf")
    r = audit_trace(trace)
    page = render_report(view_from_audit(r), tmp_path)
    browser.open(page)
    assert browser.problems() == []
    got = browser.eval("""[document.querySelector('article.lineage .badge').textContent,
                           document.querySelectorAll('svg.lineage-graph g.rec').length,
                           document.querySelector('#notices .notice-bad') !== null]""")
    assert got == ["INVALID", 4, True]
    _shot(browser, "audit-planfence-lineage", "article.lineage")


@pytest.mark.browser
def test_thousand_events_page_and_zoom(browser: Browser, tmp_path: Path) -> None:
    """G with 1,500 events: drawn in pages, one shown at a time; next/zoom work."""
    agents = [f"agent-{i}" for i in range(6)]
    events = tuple(EventView(f"e{i}", i, "output", "artifact" if i % 3 else "action",
                             agents[i % 6], causes=(f"e{i - 1}",) if i else ())
                   for i in range(1500))
    page = render_report(RunView(id="big", title="1,500 events", events=events), tmp_path)
    browser.open(page)
    assert browser.problems() == []
    state = """[Array.from(document.querySelectorAll('svg.g-page'))
                  .filter(function (s) { return s.getBoundingClientRect().height > 0; })
                  .map(function (s) { return s.getAttribute('data-page'); }),
                document.getElementById('g-page-label').textContent,
                document.getElementById('g-page-1').getAttribute('width')]"""
    shown, label, width = browser.eval(state)
    assert shown == ["1"] and label.startswith("page 1 of 15")
    browser.eval("document.querySelector('[data-g=next]').click()")
    browser.eval("document.querySelector('[data-g=zoom-out]').click()")
    shown2, label2, width2 = browser.eval(state)
    assert shown2 == ["2"] and "events 101–200" in label2
    assert float(width2) < float(width)
    _shot(browser, "g-1500-events", "#g-graph")
