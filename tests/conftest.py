"""Shared fixtures: paths to the real data in ../shared/data."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile(
    "icore", deadline=None, suppress_health_check=[HealthCheck.too_slow], max_examples=60
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "icore"))

REPO = Path(__file__).resolve().parents[1]


def _shared_data() -> Path:
    env = os.environ.get("ICORE_SHARED_DATA")
    if env:
        return Path(env)
    return REPO.parent / "shared" / "data"


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The ../shared/data folder (Mahimahi traces, Who&When traces)."""
    path = _shared_data()
    if not path.is_dir():
        pytest.skip(f"shared data not found at {path} (set ICORE_SHARED_DATA)")
    return path
