"""Render one report in headless Chromium (Debian's ``chromium`` package) and inspect the DOM.

The fixture installs Chromium with ``apt-get install -y chromium`` when it is missing and
the test runs as root with apt available; otherwise the test is skipped with the reason.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from icore.adapters import attribute, audit_trace, parse_magentic_one
from icore.report import index_from_audits, render_index, render_report, view_from_audit

FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run")
_NAMES = ("chromium", "chromium-browser")


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
                    "apt-get); install Debian's package: apt-get install -y chromium")
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


@pytest.fixture(scope="session")
def chromium() -> str:
    """Path of a Chromium binary, installed from Debian's packages if needed (or skip)."""
    return ensure_chromium()


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


def _dump_dom(exe: str, page: Path, profile: Path) -> str:
    cmd = [exe, *FLAGS, f"--user-data-dir={profile}", "--virtual-time-budget=3000",
           "--dump-dom", page.resolve().as_uri()]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=90, check=False)
    except subprocess.TimeoutExpired:
        pytest.fail("headless Chromium did not finish within 90 s")
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


@pytest.mark.browser
@pytest.mark.timeout(1200)
def test_report_renders_in_chromium(chromium: str, magentic: dict[str, Any],
                                    tmp_path: Path) -> None:
    """The report loads offline in Chromium, its bundled JS runs, the graph is in the DOM."""
    r = audit_trace(parse_magentic_one(magentic))
    out = tmp_path / "out"
    page = render_report(view_from_audit(r, attribution=attribute(r), index_href="index.html"),
                         out)
    render_index(index_from_audits([r]), out)
    dom = _dump_dom(chromium, page, tmp_path / "profile")
    assert 'id="obligation-graph"' in dom
    assert dom.count('class="node') == len(r.state.obligations)
    assert 'data-report-ready="1"' in dom  # report.js (bundled) ran
