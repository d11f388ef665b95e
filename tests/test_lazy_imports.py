"""The CLI registers its commands without importing the heavy bench libraries (#14).

``icore audit`` of a long run has a memory budget (docs/audit.md "Cost of auditing a
recorded run"); numpy, scipy, matplotlib and scikit-learn are imported only when a bench
command runs.
"""

from __future__ import annotations

import subprocess
import sys

HEAVY = ("numpy", "scipy", "matplotlib", "sklearn", "pandas")


def test_cli_import_loads_no_heavy_library() -> None:
    code = (
        "import sys, icore.cli, icore.adapters\n"
        f"print(','.join(m for m in {HEAVY!r} if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=60)
    assert out.stdout.strip() == ""
