"""``python -m icore.net._team MANIFEST --agent ID [--port P]``: serve one agent."""

import sys

from icore.net._team.launch import main

if __name__ == "__main__":
    sys.exit(main())
