"""``python -m icore`` runs the CLI."""

import sys

try:
    from icore.cli import main
except KeyboardInterrupt:
    # Ctrl-C while the CLI itself loads (slow on a loaded machine): one line, exit 130
    # as main() says it for the command's own modules, not a traceback (issue 29)
    print("interrupted", file=sys.stderr, flush=True)
    sys.exit(130)

main()
