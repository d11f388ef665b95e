"""The gateway's files checked before any upstream starts (issue 29).

A gateway reads its manifest and the files its stdio upstreams run (``command``, and each
``args`` entry that names an existing file) and writes its trace, the OpenTelemetry
``file:`` sink and the SQLite files under ``store.path``. ``icore audit`` refuses an
output that is one of its inputs; the gateway did not: ``otel: file:notes_server.py``
appended spans to the upstream's own program, ``otel: file:gw.yaml`` to the manifest,
``otel`` and ``trace`` on one file interleaved two formats, and a ``store.path`` that is
a file was found only after the upstreams had started. Each is a
:class:`GatewayManifestError` naming the field, its line and the file.
"""

from __future__ import annotations

import os
from pathlib import Path

from icore._files import file_identity
from icore.mcp._gateway_manifest import GatewayManifest


def gateway_inputs(m: GatewayManifest) -> list[tuple[str, Path]]:
    """``(field, path)`` of every existing file the gateway reads.

    The manifest (when loaded from a file), each stdio upstream's ``command`` and the
    ``args`` entries that name an existing regular file (relative to the upstream's
    ``cwd``).
    """
    out: list[tuple[str, Path]] = []
    if m.file != "<dict>":
        out.append(("the manifest", Path(m.file)))
    for name, up in m.upstreams.items():
        if up.command is None:
            continue
        cwd = m.resolve(up.cwd or ".")
        for i, arg in enumerate((up.command, *up.args)):
            if not arg or "\x00" in arg:
                continue
            p = Path(arg) if Path(arg).is_absolute() else cwd / arg
            try:
                if p.is_file():
                    where = "command" if i == 0 else f"args.{i - 1}"
                    out.append((f"upstreams.{name}.{where}", p))
            except (OSError, ValueError):
                continue
    return out


def check_outputs(m: GatewayManifest, otel_file: Path | None) -> None:
    """Refuse outputs that are inputs or each other, and a ``store.path`` not a folder.

    Args:
        m: the manifest (relative paths resolved against its folder).
        otel_file: the resolved ``otel: file:PATH`` sink, or None.

    Raises:
        icore.mcp.GatewayManifestError: ``store.path`` that exists and is not a folder; ``otel`` or
            ``trace`` naming the manifest or an upstream's program or script (writing it
            would destroy it); ``otel`` and ``trace`` on one file; an output inside
            ``store.path`` (the owners' SQLite files). Each names the field and its line.
    """
    store = m.resolve(m.store.path) if m.store.backend == "sqlite" and m.store.path else None
    if store is not None and store.exists() and not store.is_dir():
        raise m.error(f"store.path {store} is a file, not a folder: the sqlite backend keeps "
                      "one file per owner in it; give a folder path", "store", "path")
    outputs: list[tuple[str, Path]] = []
    if otel_file is not None:
        outputs.append(("otel", otel_file))
    if m.trace:
        outputs.append(("trace", m.resolve(m.trace)))
    inputs = {file_identity(p): (what, p) for what, p in reversed(gateway_inputs(m))}
    seen: dict[tuple[object, ...], str] = {}
    for what, out in outputs:
        key = file_identity(out)
        if key in inputs:
            src, p = inputs[key]
            raise m.error(f"{what} file {out} is {src} ({p}); writing it would destroy it; "
                          "give another path", what)
        if key in seen:
            raise m.error(f"{what} file {out} is also the {seen[key]} file; the two "
                          "would interleave; give two paths", what)
        seen[key] = what
        if store is not None:
            try:
                real, top = Path(os.path.realpath(out)), Path(os.path.realpath(store))
            except (OSError, ValueError):
                continue
            if top == real or top in real.parents:
                raise m.error(f"{what} file {out} lies inside store.path {store}, the "
                              "owners' SQLite files; give a path outside it", what)


__all__ = ["check_outputs", "gateway_inputs"]


SAME_PYTHON = frozenset({"python", "python3"})
"""Bare ``command`` names meaning the gateway's own interpreter (``sys.executable``)."""


def launched(command: str) -> str:
    """What a stdio upstream's ``command`` launches (its path or name).

    ``sys.executable`` for a bare ``python``/``python3`` (the gateway's venv, active or
    not), else ``command`` itself.
    """
    import sys
    return sys.executable if command in SAME_PYTHON and sys.executable else command
