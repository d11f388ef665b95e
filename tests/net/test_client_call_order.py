"""One OwnerClient connection keeps call order, also while the connection is opening.

Requests that wait for a fresh connection must leave ahead of any request made after
them; otherwise an owner's own writer, which allocates its sequence numbers in call
order, is refused ``sequence`` on its first burst (seen in CI on the group-commit test).
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from icore.memory import MemoryStore, OwnershipMap
from icore.net import OwnerClient, RpcTimeout, ServerThread, client_context, server_context
from icore.records import Record

OM = OwnershipMap.from_mapping({"req/*": "a"})

pytestmark = pytest.mark.timeout(60)


async def _burst(server: ServerThread, certs: Path, writers: int) -> list[int]:
    """``writers`` commits on one fresh client, each followed at once by a second one."""
    client = OwnerClient({"a": server.address}, identity="a",
                         ssl_context=client_context(certs, "a"))
    seq = 0
    acked: list[int] = []

    async def writer(i: int) -> None:
        nonlocal seq
        for _ in range(2):
            seq += 1  # allocated in call order, right before the request
            mine = seq
            await client.commit("a", Record.create(key=f"req/r{mine}", owner="a", seq=mine,
                                                   content={"w": i}))
            acked.append(mine)

    async def neighbour() -> None:  # another task in the loop: each turn of the loop is slow
        while len(acked) < 2 * writers:
            time.sleep(0.002)
            await asyncio.sleep(0)

    try:
        await asyncio.gather(neighbour(), *(writer(i) for i in range(writers)))
    finally:
        await client.close()
    return acked


def test_requests_waiting_for_the_connection_leave_in_call_order(certs: Path) -> None:
    for _ in range(15):  # fresh store and client each round: the first burst is the risk
        store = MemoryStore(OM, "a")
        with ServerThread(store, agent="a", ssl_context=server_context(certs, "a")) as server:
            acked = asyncio.run(_burst(server, certs, writers=8))
        assert sorted(acked) == list(range(1, 17))
        assert store.head("req/r16") is not None


def test_a_stalled_connect_is_abandoned_when_its_last_caller_times_out(certs: Path) -> None:
    """A listener that never finishes the handshake: each timed-out call stops its
    connect, and the next call dials again rather than waiting on the stalled one."""
    import socket

    async def main(addr: tuple[str, int]) -> int:
        client = OwnerClient({"a": addr}, identity="a", ssl_context=client_context(certs, "a"))
        timeouts = 0
        for _ in range(2):
            calls = [client.ping("a", timeout_s=0.2) for _ in range(3)]
            results = await asyncio.gather(*calls, return_exceptions=True)
            timeouts += sum(isinstance(r, RpcTimeout) for r in results)
        await client.close()
        return timeouts

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(8)
        assert asyncio.run(main(sock.getsockname())) == 6
        sock.setblocking(False)
        dials = 0
        while True:
            try:
                sock.accept()[0].close()
            except BlockingIOError:
                break
            dials += 1
    assert dials == 2  # one connect per round, shared by its three callers
