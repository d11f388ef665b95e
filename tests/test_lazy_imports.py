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


def test_the_mcp_gateway_starts_without_the_audit() -> None:
    """A gateway process (launched per client by Claude Desktop, Cursor, ...) loads no
    audit layer: it writes trace lines, the audit reads them later (~0.5 s of CPU per
    start saved, lead89)."""
    code = (
        "import sys, icore.mcp._gateway\n"
        "print(','.join(m for m in ('icore.adapters', 'icore.state', 'icore.audit')"
        " if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=60)
    assert out.stdout.strip() == ""
