"""``icore certs init``: a team CA and one certificate per agent (mutual TLS 1.3)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from icore.cli.inputs import (
    nonempty_path,
    refuse_input_as_output,
    refuse_non_folder,
    refuse_special_file,
)
from icore.net import TeamManifest, TeamManifestError, init_team_certs

certs_app = typer.Typer(help="Team certificates for authenticated TCP.", no_args_is_help=True,
                        rich_markup_mode="markdown")


@certs_app.command("init")
def certs_init(
    manifest: Annotated[Path | None, typer.Option(
        "--manifest", "-m", parser=nonempty_path,
        help="Team manifest: certify its agents into certs_dir.")] = None,
    out: Annotated[Path | None, typer.Option(
        "--dir", "-d", parser=nonempty_path,
        help="Certs folder (default: the manifest's certs_dir).")] = None,
    agent: Annotated[list[str] | None, typer.Option(
        "--agent", "-a", help="Agent id to certify (repeatable; adds to the manifest's).")
    ] = None,
    team: Annotated[str | None, typer.Option(help="Team name in the certificates.")] = None,
    days: Annotated[int, typer.Option(min=1, max=36500, help="Validity in days (1..36500).")] = 365,
    force: Annotated[bool, typer.Option(
        "--force", help="Replace existing CA and certificates.")] = False,
) -> None:
    """Create the team CA (reused if present) and a key + certificate per agent.

    A certificate or key path that is the manifest (also through a link), an empty
    --dir or --manifest, and a certs folder that cannot be created or written (a file,
    ``/proc/x``, a name over the file system's limit) are usage errors (exit 2, naming
    the option and the reason) before anything is written.
    """
    agents = list(dict.fromkeys(agent or []))  # --agent a --agent a: one certificate
    team_name = team or "icore-team"
    folder = out
    if manifest is not None:
        refuse_special_file(manifest, what="team manifest")
        try:
            m = TeamManifest.load(manifest)
        except TeamManifestError as exc:
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(2) from exc
        agents = m.agent_ids + [a for a in agents if a not in m.agent_ids]
        team_name = team or m.team
        folder = folder or m.certs_dir
    if folder is None or not agents:
        typer.echo("error: give --manifest, or --dir and at least one --agent", err=True)
        raise typer.Exit(2)
    refuse_non_folder(Path(folder), what="--dir" if out is not None else
                      f"certs_dir of {manifest}")
    refuse_input_as_output(
        [("--dir", Path(folder) / n) for n in ("ca.crt", "ca.key", *(
            f"{a}{ext}" for a in agents for ext in (".crt", ".key")))],
        [manifest] if manifest is not None else [])
    try:
        path = init_team_certs(folder, agents, team=team_name, days=days, overwrite=force)
    except ValueError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from exc
    typer.echo(f"team CA and {len(agents)} agent certificates in {path}")


def register(app: typer.Typer, bench: typer.Typer) -> None:
    """Add ``icore certs``."""
    app.add_typer(certs_app, name="certs")
