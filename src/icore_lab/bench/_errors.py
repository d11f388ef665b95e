"""Bench errors: the ``BenchError`` branch of the icore error tree.

::

    BenchError                 bench: a harness could not run as asked
    ├── UnknownPreset (ValueError)
    ├── BadOption (ValueError) an option value out of range (``fields['option']``)
    ├── TransportUnavailable   ``--transport tcp`` cannot run here
    ├── TraceUnavailable       a trace file a preset needs is unreadable or malformed
    ├── OutputUnavailable      the results folder cannot be created or written
    └── ReplayFailed           one replay episode could not finish (names where)
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


class TraceUnavailable(BenchError):
    """A Mahimahi trace a preset needs is missing, not a regular file, or malformed.

    ``fields['link']`` names the link.
    """


class OutputUnavailable(BenchError):
    """The results folder cannot be used (``fields['path']``, ``fields['reason']``)."""


class ReplayFailed(BenchError):
    """An episode could not finish.

    E.g. a synchronous step kept timing out on a trace with no capacity (``fields``:
    template, link, offset_ms, policy).
    """


__all__ = ["BadOption", "BenchError", "OutputUnavailable", "ReplayFailed",
           "TraceUnavailable", "TransportUnavailable", "UnknownPreset"]
