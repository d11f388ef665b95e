"""A gateway trace that hits a full disk keeps the gateway's stop clean (#29, round 9).

Under ``prlimit --fsize`` (what a full disk does) the live trace's writes fail and are
logged; the stop then closed the file, whose buffer still held the failed write, and
the ``OSError`` escaped: ``icore mcp`` ended with ``error: File too large``, exit 1,
naming no file. A real file in a child process with ``RLIMIT_FSIZE``; nothing mocked.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

CHILD = textwrap.dedent("""
    import resource, sys
    from pathlib import Path
    from icore.mcp._session_log import GatewayTrace
    resource.setrlimit(resource.RLIMIT_FSIZE, (20_000, 20_000))
    t = GatewayTrace("gw", Path(sys.argv[1]))
    for i in range(12):
        t.note("gateway", f"note {i} " + "x" * 3000)
    t.close()
    print("CLOSED", t.written_to)
""")


@pytest.mark.timeout(60)
def test_a_trace_past_the_file_size_limit_is_logged_not_raised(tmp_path: Path) -> None:
    p = tmp_path / "trace.jsonl"
    r = subprocess.run([sys.executable, "-c", CHILD, str(p)], capture_output=True,
                       text=True, timeout=60, check=False)
    assert "Traceback" not in r.stderr, r.stderr[-2000:]
    assert r.returncode == 0
    assert "CLOSED None" in r.stdout  # the final rewrite could not be written either
    assert f"cannot write the trace {p}: [Errno 27] File too large" in r.stderr
    assert p.stat().st_size <= 20_000
