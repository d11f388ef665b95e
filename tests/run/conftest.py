"""Fixtures for live-run tests: a run folder per test, small manifests."""

from __future__ import annotations

from pathlib import Path

import pytest

from icore.live import RunManifest, default_manifest


@pytest.fixture
def manifest() -> RunManifest:
    """The embedded reservation manifest (scripted backend, PlanFence)."""
    return default_manifest("reservation")


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    """A fresh run folder."""
    d = tmp_path / "run"
    d.mkdir()
    return d
