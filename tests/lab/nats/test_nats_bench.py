"""``icore bench net --backend nats``: the side-by-side backend benchmark runs and prints."""

from __future__ import annotations

import math

import pytest
from typer.testing import CliRunner

from icore.cli import app
from icore_lab.bench._errors import BadOption
from icore_lab.bench.micro._backends import run_backends


@pytest.mark.slow
def test_backends_smoke() -> None:
    """A tiny run of icore's owner service and a NATS node gives finite, positive figures."""
    figs = run_backends(n=20, seconds=0.3, backends=["icore-tcp", "nats-1", "nats-1-json"])
    assert [f.backend for f in figs] == ["icore-tcp", "nats-1", "nats-1-json"]
    for f in figs:
        for v in (f.p50_d1_ms, f.p99_d1_ms, f.p50_d8_ms, f.p99_d8_ms,
                  f.validations_per_s, f.commits_per_s, f.bytes_per_validation,
                  f.bytes_per_validation_d8):
            assert math.isfinite(v) and v > 0, f
        assert f.p99_d1_ms >= f.p50_d1_ms
    # NATS pays a get per key plus the quorum barrier: more bytes than one batched RPC
    assert figs[1].bytes_per_validation > figs[0].bytes_per_validation
    # one batched direct get of eight heads moves fewer bytes than eight JSON gets
    assert figs[1].bytes_per_validation_d8 < figs[2].bytes_per_validation_d8


def test_bad_backend_options() -> None:
    """Unknown backends are clean errors, before anything starts."""
    with pytest.raises(BadOption):
        run_backends(n=1, seconds=0.1, backends=["etcd"])
    r = CliRunner().invoke(app, ["bench", "net", "--backend", "etcd"])
    assert r.exit_code == 2 and "--backend" in r.output
