"""An upstream's progress that no JSON number can say is dropped, not relayed (#29, round 10).

An upstream's ``notifications/progress`` with ``"progress": 1e400`` parses as infinity;
relayed, the client got ``"progress": null`` (MCP requires a number). The sweep's
``prog10/`` family found it through a real gateway; the relay now drops a progress or
total that is no finite number (as it drops a token it never handed out).
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import anyio
import pytest

from icore.mcp._gateway_progress import ProgressRelay

from .test_gateway_progress import _Note, _Session


@pytest.mark.parametrize(("progress", "total", "sent"), [
    (float("inf"), None, False), (float("nan"), None, False), (1.0, float("inf"), False),
    (-float("inf"), 2.0, False), (1.0, 2.0, True), (0.0, None, True)])
def test_progress_that_is_no_finite_number_is_dropped(progress: float, total: Any,
                                                      sent: bool) -> None:
    relay, session = ProgressRelay(), _Session()
    ctx = SimpleNamespace(session=session, request_id="1")

    async def main() -> None:
        with relay.relayed(ctx, {"progressToken": "t"}, "up", None) as meta:
            note = _Note("notifications/progress", meta["progressToken"])
            note.params.progress, note.params.total = progress, total
            assert await relay.relay("up", note)  # a progress notification: handled here
        assert bool(session.sent) is sent, session.sent

    anyio.run(main)
