"""Bench errors: the ``BenchError`` branch of the icore error tree.

::

    BenchError                 bench: a harness could not run as asked
    ├── UnknownPreset (ValueError)
    ├── BadOption (ValueError) an option value out of range (``fields['option']``)
    └── TransportUnavailable   ``--transport tcp`` cannot run here
"""

from __future__ import annotations

from icore.errors import ErrorCode, IcoreError


class BenchError(IcoreError):
    """A benchmark harness could not run as asked."""

    code = ErrorCode.BENCH


class UnknownPreset(BenchError, ValueError):
    """No preset has that name (``fields['known']`` lists the valid ones)."""


class BadOption(BenchError, ValueError):
    """An option value is out of range (``fields['option']``, ``fields['value']``)."""


class TransportUnavailable(BenchError):
    """The requested transport cannot run the replay (``fields['transport']``)."""


__all__ = ["BadOption", "BenchError", "TransportUnavailable", "UnknownPreset"]
