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
import re
from pathlib import Path

from icore._files import file_identity, written_path_problem
from icore.errors import redact
from icore.mcp._gateway_manifest import GatewayManifest, url_problem


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
            ``store.path`` (the owners' SQLite files); an output whose resolved path
            holds a surrogate (the manifest's folder named in bytes that are not UTF-8:
            :func:`icore._files.written_path_problem`). Each names the field and its line.
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
        if (bad := written_path_problem(out)) is not None:  # the folder it resolved in
            raise m.error(f"{what} file {ascii(str(out))[1:-1]}: the path {bad}", what)
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


def checked_paths(manifest: GatewayManifest) -> str | None:
    """The ``otel`` endpoint checked (a resolved ``file:PATH`` or an http(s) URL).

    The stdio upstreams' ``cwd`` too: both before any upstream starts.

    Raises:
        GatewayManifestError: a ``cwd`` that is not a folder, an ``otel`` file that is a
            folder or a device, an output that is an input or a ``store.path`` that is a
            file (:func:`~icore.mcp._gateway_paths.check_outputs`), or an ``otel`` that
            is no http(s) URL with a host and a port in 1-65535 (each was found only at
            start-up, as "unreachable"; QA r8-bad D13), naming the field and its line.
    """
    for n, up in manifest.upstreams.items():
        if up.command is not None and not (cwd := manifest.resolve(up.cwd or ".")).is_dir():
            raise manifest.error(f"cwd {cwd} is not a folder ("
                                 f"{'it is a file' if cwd.exists() else 'not found'})",
                                 "upstreams", n, "cwd")
    ep = manifest.otel
    if not ep or not ep.startswith("file:"):
        check_outputs(manifest, None)
    if not ep:
        return None
    if ep.startswith("file:"):
        fp = manifest.resolve(ep.removeprefix("file:"))
        if not ep.removeprefix("file:").strip():
            raise manifest.error("otel file: names no path; use file:PATH", "otel")
        if fp.exists() and not fp.is_file():
            raise manifest.error(f"otel file {fp} is not a regular file (a folder "
                                 "or a device)", "otel")
        check_outputs(manifest, fp)
        return "file:" + str(fp)
    why = url_problem(ep) if re.match(r"^https?://", ep) else \
        "use an http(s):// OTLP collector URL or file:PATH"
    if why is not None:
        raise manifest.error(f"{redact(ep)!r}: {why}", "otel")
    return ep
