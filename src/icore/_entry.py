"""The ``icore`` command's entry point: ``[project.scripts]`` and ``python -m icore``.

Kept free of imports beyond the standard library, so a Ctrl-C while the CLI's own modules
load (slow on a loaded machine) is one line and exit 130, never a traceback (issue 29).
"""

from __future__ import annotations

import sys


def main() -> None:
    """Load the CLI and run it (:func:`icore.cli.main`); Ctrl-C while loading exits 130.

    Raises:
        SystemExit: the command's exit status (130 when interrupted while loading).
    """
    try:
        from icore.cli import main as cli_main
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr, flush=True)
        sys.exit(130)
    cli_main()
