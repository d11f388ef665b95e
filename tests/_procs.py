"""What the restart tests share: a real app process killed inside its tool body.

Not a test module (no ``test_`` prefix); imported as ``tests._procs``.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path


def effects(db: Path) -> list[str]:
    """The lines of ``db/effects.log`` (what the app's tool bodies did), [] before any."""
    path = db / "effects.log"
    return path.read_text().splitlines() if path.exists() else []


def kill_inside_body(app: Path, db: Path, env: Mapping[str, str], *, timeout_s: float = 120,
                     started: Callable[[Path], bool] = lambda db: bool(effects(db))) -> None:
    """Run ``python APP run DB`` and SIGKILL it once ``started(db)`` (a tool body began).

    Raises:
        AssertionError: the app exited first (its stderr's tail), or no body started
            within ``timeout_s``, or the process did not die of the SIGKILL.
    """
    proc = subprocess.Popen([sys.executable, str(app), "run", str(db)], env=dict(env),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + timeout_s
        while not started(db):
            assert proc.poll() is None, proc.stderr.read().decode()[-2000:]  # type: ignore[union-attr]
            assert time.monotonic() < deadline, "the tool body never started"
            time.sleep(0.02)
        os.kill(proc.pid, signal.SIGKILL)  # inside the body: its effect done, no result
    finally:
        proc.wait(30)
        proc.stderr.close()  # type: ignore[union-attr]
    assert proc.returncode == -signal.SIGKILL
