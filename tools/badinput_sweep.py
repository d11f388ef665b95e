#!/usr/bin/env python3
"""Issue 29 bad-input sweep: several hundred generated bad inputs, each in a subprocess.

Run from the repository with icore importable, e.g.
``PYTHONPATH=src nice -n 10 .venv/bin/python tools/badinput_sweep.py --json sweep.json``;
prints the counts per family and the defects grouped by cause (tools/badinput/).
Exit 0 when no defect was found.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from badinput.sweep import main

if __name__ == "__main__":
    sys.exit(main())
