"""``icore mcp MANIFEST``: the MCP gateway; ``icore bench mcp``: its cost (issue 25)."""

from __future__ import annotations

import logging
import re
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from icore._files import not_a_regular_file
from icore.cli.inputs import nonempty_path
from icore.errors import redact


class _RedactingFormatter(logging.Formatter):
    """Log lines with URL credentials redacted (:func:`icore.errors.redact`, issue 29).

    Every line the gateway logs on stderr (what Claude Desktop and Cursor keep in their
    MCP log files): icore's own (an upstream URL that failed) and the libraries' (httpx
    logs each request's URL at INFO). A record that carries an exception (the MCP SDK
    logs one for each line an upstream prints that is no JSON-RPC message) ends in the
    exception's first lines, not its traceback, unless ``--log-level DEBUG`` asks for it.
    """

    def __init__(self, fmt: str, *, tracebacks: bool) -> None:
        super().__init__(fmt)
        self.tracebacks = tracebacks

    def formatException(self, ei: Any) -> str:
        """The traceback at DEBUG, else ``<type>: <first two lines of the message>``."""
        if self.tracebacks:
            return super().formatException(ei)
        exc = ei[1]
        lines = [x.strip() for x in str(exc).splitlines() if x.strip()][:2]
        return f"  ({type(exc).__name__}: {'; '.join(lines)[:400] or 'no detail'})"

    def format(self, record: logging.LogRecord) -> str:
        """The formatted line, redacted."""
        return redact(super().format(record))


def _host_port(value: str) -> tuple[str, int]:
    import socket
    m = re.fullmatch(r"\[?([^\]]*?)\]?:([0-9]+)", value.strip())  # ASCII digits only
    if m is None or not m.group(1):
        raise typer.BadParameter("use HOST:PORT, e.g. 127.0.0.1:8808", param_hint="--http")
    if not 0 <= int(m.group(2)[:6]) <= 65535:
        raise typer.BadParameter(f"port {m.group(2)[:12]} is out of range: a port is a "
                                 "number in 1-65535 (0: any free port); use HOST:PORT, "
                                 "e.g. 127.0.0.1:8808", param_hint="--http")
    try:  # an address that cannot be bound is a usage error, before any work
        socket.getaddrinfo(m.group(1), int(m.group(2)), type=socket.SOCK_STREAM)
    except (OSError, UnicodeError) as exc:
        raise typer.BadParameter(f"{m.group(1)!r} is not a host address here ({exc}); use "
                                 "HOST:PORT, e.g. 127.0.0.1:8808", param_hint="--http") from None
    return m.group(1), int(m.group(2))


def mcp(
    manifest: Annotated[Path, typer.Argument(help="Gateway manifest (YAML).",
                                             parser=nonempty_path)],
    http: Annotated[str | None, typer.Option(
        "--http", metavar="HOST:PORT",
        help="Serve streamable HTTP at http://HOST:PORT/mcp instead of stdio.")] = None,
    log_level: Annotated[str, typer.Option(help="Logging level (stderr).")] = "WARNING",
) -> None:
    """An MCP gateway: PlanFence and iCORE recording in front of any MCP server.

    Proxies the upstream MCP servers the manifest names (stdio commands or streamable-HTTP
    URLs) to any MCP client, over stdio (default: what Claude Desktop and Cursor launch)
    or streamable HTTP (--http). Protected tools run only when the facts the session read
    are still current (planfence Alg. 1); every read, call and decision goes to the
    manifest's trace, which `icore audit` reads. See docs/mcp.md.
    """
    import anyio

    from icore._extras import event_loop_factory
    from icore.errors import IcoreError, MissingExtra
    try:  # mcp missing or 1.x (an adapters venv): one line, before any traceback
        from icore.mcp import GatewayManifestError, load_manifest, serve_http, serve_stdio
    except MissingExtra as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None

    level = logging.getLevelName(log_level.upper())
    if not isinstance(level, int):
        raise typer.BadParameter("use DEBUG, INFO, WARNING, ERROR or CRITICAL",
                                 param_hint="--log-level")
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_RedactingFormatter("%(asctime)s %(levelname)s %(name)s: %(message)s",
                                             tracebacks=level <= logging.DEBUG))
    logging.basicConfig(level=level, handlers=[handler])
    addr = _host_port(http) if http is not None else None
    # as cli.inputs.refuse_special_file, without importing the benchmark modules it
    # needs (the gateway's start-up is what an MCP client waits for)
    problem = not_a_regular_file(manifest)
    if problem is not None:
        typer.echo(f"error: gateway manifest {manifest} {problem}; refusing to read it",
                   err=True)
        raise typer.Exit(2)
    try:
        m = load_manifest(manifest)
    except GatewayManifestError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from exc
    try:
        # uvloop when installed (ICORE_EVENT_LOOP=asyncio: the standard loop): the hop's
        # socket and pipe calls and its task switches are most of a call's cost (#25)
        options = {"loop_factory": event_loop_factory()}
    except (ValueError, MissingExtra) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    try:
        if addr is None:
            anyio.run(serve_stdio, m, backend_options=options)
        else:
            anyio.run(serve_http, m, addr[0], addr[1], backend_options=options)
    except KeyboardInterrupt:
        # Ctrl-C before the gateway's own handler is in place (start-up: upstreams still
        # connecting) or after it is gone (the stop): as a second signal, exit 130 (#25)
        typer.echo("icore mcp: SIGINT: stopping now (the gateway was starting or "
                   "stopping)", err=True)
        raise typer.Exit(130) from None
    except Exception as exc:  # a typed error, possibly inside a task group's group
        err = _typed(exc)
        if err is None:
            raise
        if isinstance(err, OSError) and not isinstance(err, IcoreError):
            # the system's answer (a port in use): its own text, which names the
            # address, never blaming the manifest (QA qa-crew S4)
            typer.echo(f"error: {err.strerror or err}", err=True)
            raise typer.Exit(1) from None
        said = str(err)  # which gateway: its manifest named, as a load error names it
        where = "" if manifest.name in said else f"gateway manifest {manifest}: "
        typer.echo(f"error: {where}{said}", err=True)
        raise typer.Exit(2 if isinstance(err, GatewayManifestError) else 1) from None


def _typed(exc: BaseException) -> BaseException | None:
    """The icore error (or an OS error: a port in use) behind ``exc``, else None.

    A manifest error found at start (a protected tool no upstream serves) exits 2 like
    one found when loading; an upstream that cannot start, a store that cannot open, a
    missing extra exit 1 with their one-line message.
    """
    from icore.errors import IcoreError
    stack = [exc]
    while stack:
        e = stack.pop(0)
        if isinstance(e, IcoreError | OSError):
            return e
        if isinstance(e, BaseExceptionGroup):
            stack.extend(e.exceptions)
    return None


def bench_mcp(
    n: int = typer.Option(300, min=10, help="Timed tools/call per configuration."),
    deps: int = typer.Option(8, min=1, max=64, help="d = |D(a)| of the protected tools."),
    quick: bool = typer.Option(False, "--quick", help="Small run (smoke test)."),
) -> None:
    """tools/call p50/p99 through the gateway (protected, unprotected) vs the upstream directly.

    Over stdio and streamable HTTP on loopback, in one run, with an SDK-only pass-through
    proxy (no icore code) as the floor of any MCP hop; prints the added latency and the
    ratio gateway / SDK proxy (target: <= 1 ms p50 added for a protected call, d <= 8).
    """
    from rich.console import Console
    from rich.table import Table

    from icore.mcp import run_bench

    if quick:
        n = 40
    console = Console(width=120, highlight=False)
    try:
        with console.status("timing tools/call over stdio and HTTP..."):
            rows = run_bench(n=n, deps=deps)
    except Exception as exc:  # an upstream lost under load: one line, not nested groups
        err = _typed(exc)
        if err is None:
            raise
        typer.echo(f"error: {redact(str(err))}", err=True)
        raise typer.Exit(1) from None
    t = Table("transport", "path", "p50 ms", "p99 ms", "added p50 ms", "/ sdk proxy",
              title=f"tools/call, n={n}, protected d={deps}")
    proxy = {r.transport: r.p50_ms for r in rows
             if r.path.startswith("sdk proxy") and r.error is None}
    failed = [r for r in rows if r.error is not None]
    for r in rows:
        if r.error is not None:  # a configuration that failed: a row saying why
            t.add_row(r.transport, r.path, "-", "-", "-", "",
                      end_section=False, style="red")
            t.add_row("", f"  FAILED: {redact(r.error)}", "", "", "", "")
            continue
        ratio = ""
        if r.path.startswith("gateway") and proxy.get(r.transport):
            ratio = f"{r.p50_ms / proxy[r.transport]:.2f}x"
        t.add_row(r.transport, r.path, f"{r.p50_ms:.3f}", f"{r.p99_ms:.3f}",
                  "" if r.added_p50_ms is None else f"{r.added_p50_ms:+.3f}", ratio)
    console.print(t)
    for tr in ("stdio", "http"):
        by = {r.path.split(" d=")[0]: r for r in rows
              if r.transport == tr and r.error is None}
        px, pr = by.get("sdk proxy (no icore)"), by.get("gateway protected")
        rr = by.get("gateway protected resources")
        tr_ = by.get("gateway protected trusted")
        dr = by.get("direct (upstream)")
        if px is not None and pr is not None and dr is not None:
            console.print(f"{tr}: protected call {pr.p50_ms - px.p50_ms:+.2f} ms p50 over "
                          f"the SDK-only proxy ({pr.p50_ms / px.p50_ms:.2f}x); the SDK hop "
                          f"itself {px.p50_ms - dr.p50_ms:+.2f} ms "
                          "over the direct call (target: <= 1 ms added)")
        if pr is not None and rr is not None:
            console.print(f"{tr}: re-reading d={deps} upstream resources at validation "
                          f"adds {rr.p50_ms - pr.p50_ms:+.2f} ms p50 "
                          f"({rr.p99_ms - pr.p99_ms:+.2f} ms p99) to a protected call")
        if rr is not None and tr_ is not None:
            console.print(f"{tr}: with trust_updates (live subscription) the same call "
                          f"costs {tr_.p50_ms:.2f} ms p50 instead of {rr.p50_ms:.2f}")
    if failed:
        typer.echo(f"error: {len(failed)} configuration(s) failed: "
                   + "; ".join(f"{r.transport} {r.path}" for r in failed), err=True)
        raise typer.Exit(1)


def register(app: typer.Typer, bench: typer.Typer) -> None:
    """Add ``icore mcp`` and ``icore bench mcp``."""
    app.command("mcp")(mcp)
    bench.command("mcp")(bench_mcp)
