"""``icore mcp`` on a terminal (stdin not a pipe): the same line cap as on a pipe (#29).

The gateway serves pipes on its event loop; anything else (a terminal, a file) went
through the MCP SDK's own ``stdio_server``, which read a line of any length whole and
dropped a malformed one unanswered. Now a worker thread reads it through the same
line splitter: a line over ``max_message_mb`` is answered ``-32600`` with its id and never
held, a malformed line is answered, the session goes on. A real ``icore mcp`` process
whose stdin is a pseudo-terminal (raw mode), in front of tests/mcp/upstream_server.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from .conftest import env, stdio_upstream, write_manifest

pytestmark = [pytest.mark.timeout(120),
              pytest.mark.skipif(sys.platform == "win32", reason="a POSIX terminal")]


def test_a_terminal_stdin_has_the_pipe_cap_and_answers(tmp_path: Path) -> None:
    import pty
    import tty
    manifest = write_manifest(tmp_path, {"trip": stdio_upstream(tmp_path / "up.log")},
                              max_message_mb=1)
    master, slave = pty.openpty()
    tty.setraw(slave)  # no line editing: lines of any length pass as they are
    p = subprocess.Popen([sys.executable, "-m", "icore", "mcp", str(manifest)],
                         stdin=slave, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                         env=env(), start_new_session=True)
    os.close(slave)
    assert p.stdout is not None

    def send(obj: Any) -> None:
        data = (obj if isinstance(obj, str) else json.dumps(obj)).encode() + b"\n"
        threading.Thread(target=os.write, args=(master, data)).start()  # the pty buffer
        # is small: the gateway reads while the rest is written

    def call(rid: int, name: str, args: dict[str, Any]) -> dict[str, Any]:
        send({"jsonrpc": "2.0", "id": rid, "method": "tools/call",
              "params": {"name": name, "arguments": args}})
        return json.loads(p.stdout.readline())  # type: ignore[union-attr]

    try:
        send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "tty", "version": "1"}}})
        assert json.loads(p.stdout.readline())["id"] == 1
        send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        big = call(7, "echo", {"text": "x" * (2 << 20)})
        assert big["id"] == 7 and big["error"]["code"] == -32600, str(big)[:300]
        assert "max_message_mb (1 MiB" in big["error"]["message"]
        send('{"jsonrpc": "2.0", "id": 8, "method": ')  # malformed: answered, not dropped
        assert json.loads(p.stdout.readline())["error"]["code"] == -32700
        ok = call(9, "echo", {"text": "hi"})
        assert ok["id"] == 9 and ok["result"]["content"][0]["text"] == "hi", ok
    finally:
        os.close(master)  # the terminal's end: the gateway stops
        try:
            p.wait(timeout=30)
        finally:
            if p.poll() is None:
                p.kill()
                p.wait(timeout=10)
            p.stdout.close()
    assert p.returncode == 0
