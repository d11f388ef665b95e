"""Values of a gateway manifest checked on their own: paths, texts, URLs, the file size.

One check for every path and command field (#29, QA qa-new8 S2: a NUL byte in ``trace``
was a traceback, in ``command`` it ran the system python), a NUL refused in what goes to
a process or a socket, an URL's host and port, and the manifest file read up to
:data:`MAX_MANIFEST_BYTES` (a 300 MB file was parsed for over a minute).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from icore._files import path_problem, written_path_problem

MAX_MANIFEST_BYTES = 16 << 20
"""Largest gateway manifest file read, bytes (16 MiB; a bigger one is refused unparsed)."""
DEFAULT_MAX_MESSAGE_MB = 16.0
"""Default ``max_message_mb``: the largest JSON-RPC message read, MiB (a client's request,
an upstream's answer)."""
DEFAULT_CONNECT_TIMEOUT_S = 30.0
"""Least default ``connect_timeout_s`` of an upstream, seconds (a stdio server's
interpreter start can take seconds on a loaded machine)."""


def read_capped(p: Path) -> bytes:
    """The manifest file's bytes, refused unparsed over :data:`MAX_MANIFEST_BYTES`.

    Raises:
        OSError: it cannot be read.
        ValueError: it is over the limit (the loader names the file).
    """
    with p.open("rb") as f:  # the size as read: a file growing meanwhile is held too
        raw = f.read(MAX_MANIFEST_BYTES + 1)
    if len(raw) > MAX_MANIFEST_BYTES:
        raise ValueError(f"{p} is over {MAX_MANIFEST_BYTES >> 20} MiB; a manifest is a "
                         "few KiB (facts.initial values are records, at most 1 MiB "
                         "each): refusing to parse it")
    return raw


def checked_path(value: str | None) -> str | None:
    """The one check of every path and command field of a manifest (#29, QA qa-new8 S2).

    Raises:
        ValueError: ``value`` cannot name a file (a NUL byte, a lone surrogate, a name
            over the file system's limit: :func:`icore._files.path_problem`); the
            manifest loader names the file, the field and its line.
    """
    if value is None or value == "":
        return value  # absent (an empty trace keeps it in memory; an empty command is
        # refused by its own check)
    if (bad := path_problem(value)) is not None:
        raise ValueError(f"{value[:80]!r} cannot name a file: the path {bad}")
    return value


def checked_output(value: str | None) -> str | None:
    """:func:`checked_path` for a file the gateway writes (``trace``, ``otel: file:``).

    Raises:
        ValueError: as :func:`checked_path`, or the path holds a surrogate (a name of
            bytes that are not UTF-8: :func:`icore._files.written_path_problem`, the
            rule ``RunRecorder.write`` follows too).
    """
    if value is None or value == "":
        return value
    if (bad := written_path_problem(value)) is not None:
        raise ValueError(f"{value[:80]!r} cannot name a file: the path {bad}")
    return value


def checked_text(value: Any) -> Any:
    """``value`` (a str, or a list/dict of them) refused when a string holds a NUL byte.

    For what goes to a process or a socket (``args``, ``env``, ``url``, ``headers``): the
    system refuses a NUL there only when the upstream starts (a traceback, #29).

    Raises:
        ValueError: a NUL byte in a string (the value itself is not shown: it may be a
            secret).
    """
    items = value.items() if isinstance(value, Mapping) else \
        enumerate(value) if isinstance(value, list | tuple) else [(None, value)]
    for k, v in items:
        for part in (k, v):
            if isinstance(part, str) and "\x00" in part:
                where = "" if k is None else f" (entry {str(k)[:40]!r})"
                raise ValueError(f"holds a NUL byte{where}, which no process or request "
                                 "can carry")
    return value


def not_null(value: Any) -> Any:
    """Pydantic ``before`` validator of an optional number: an explicit null is refused.

    ``connect_timeout_s:`` with no value (YAML null) was taken for "use the default"
    while every other number of the manifest refuses null (sweep round 8): the key is
    left out for the default.

    Raises:
        ValueError: ``value`` is None (a manifest error naming the field and its line).
    """
    if value is None:
        raise ValueError("must be a number of seconds > 0, not null (leave the key out "
                         "for the default)")
    return value


def url_problem(url: str) -> str | None:
    """What is wrong with an ``http(s)://`` URL's host and port, or None (no request).

    A port out of 1-65535 (``:99999``, ``:-1``, ``:0``) or no host was found only when the
    upstream could not be reached (QA r8-bad D13).
    """
    try:
        u = urlsplit(url)
        port = u.port
    except ValueError as exc:  # "Port out of range 0-65535", "Port could not be cast..."
        return f"not a valid URL ({exc})" + ("; a port is a number in 1-65535"
                                             if "Port" in str(exc) else "")
    if not u.hostname:
        return "the URL names no host"
    if port == 0:
        return "port 0 is not a port (a number in 1-65535)"
    return None


def _address(owner: str, a: str) -> tuple[str, int]:
    host, _, port = a.rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"address of owner {owner!r} must be host:port, not {a!r}")
    return host.strip("[]"), int(port)


__all__ = [
    "DEFAULT_CONNECT_TIMEOUT_S",
    "DEFAULT_MAX_MESSAGE_MB",
    "MAX_MANIFEST_BYTES",
    "checked_output",
    "checked_path",
    "checked_text",
    "not_null",
    "read_capped",
    "url_problem",
]
