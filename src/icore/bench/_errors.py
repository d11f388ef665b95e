"""Bench errors: the ``BenchError`` branch of the icore error tree.

::

    BenchError                 bench: a harness could not run as asked
    ├── UnknownPreset (ValueError)
    └── TransportUnavailable   ``--transport tcp`` cannot run here
"""

from __future__ import annotations

from icore.errors import ErrorCode, IcoreError


class BenchError(IcoreError):
    """A benchmark harness could not run as asked."""

    code = ErrorCode.BENCH


class UnknownPreset(BenchError, ValueError):
    """No preset has that name (``fields['known']`` lists the valid ones)."""


class TransportUnavailable(BenchError):
    """The requested transport cannot run the replay (``fields['transport']``)."""


__all__ = ["BenchError", "TransportUnavailable", "UnknownPreset"]
