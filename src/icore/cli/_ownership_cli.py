"""``icore owners``: a :meth:`Workspace.sqlite` folder's ownership record (#28)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Annotated

import typer

from icore.cli.inputs import nonempty_path
from icore.workspace import ownership_record, reassign_owner

owners_app = typer.Typer(help="The ownership record of a Workspace.sqlite folder.",
                         no_args_is_help=True, rich_markup_mode="markdown")


@owners_app.command("show")
def owners_show(
    folder: Annotated[Path, typer.Argument(help="The Workspace.sqlite folder.",
                                           parser=nonempty_path)],
) -> None:
    """Print the folder's ownership record (JSON).

    Its maps as opened and with the re-assignments applied, and the re-assignments in
    order.
    """
    typer.echo(json.dumps(ownership_record(folder), indent=2, sort_keys=True))


@owners_app.command("reassign")
def owners_reassign(
    folder: Annotated[Path, typer.Argument(help="The Workspace.sqlite folder.",
                                           parser=nonempty_path)],
    pattern: Annotated[list[str], typer.Argument(
        help="The entries to re-assign together: patterns ('campaign/*') or exact keys.")],
    to: Annotated[str, typer.Option("--to", help="The new owner.")],
) -> None:
    """Re-assign PATTERN (one or more entries) to the owner --to, moving its facts.

    See docs/workspace.md "Re-assigning an owner". Refused (exit 1, nothing changed)
    while any process has the folder open. The old
    owner's file keeps every record; each of its heads now routed to the new owner is
    written to the new owner's file with the same value; the re-assignment is a new row
    of the record. Prints what moved (JSON).
    """
    done = reassign_owner(folder, pattern, to=to)
    typer.echo(json.dumps(dataclasses.asdict(done), indent=2, sort_keys=True))


def register(app: typer.Typer, bench: typer.Typer) -> None:
    """Add ``icore owners``."""
    app.add_typer(owners_app, name="owners")
