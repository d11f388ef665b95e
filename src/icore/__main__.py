"""``python -m icore`` runs the CLI."""

from icore.cli import main

main()
