"""The gate's own NATS connection (#27): its frame parser, and a server restart mid-read.

The parser is pure: any split of a byte stream into chunks gives the same frames as the
whole stream (hypothesis), and a barrier acknowledgement read without JSON agrees with
the JSON reading. The connection runs against a real nats-server: a server
killed while a validation waits for its replies fails that validation at once with a
typed error (blocked, not a timeout), and the next validation after the restart
reconnects and is authorized.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from icore.errors import StoreError
from icore.fence import Outcome, avalidate
from icore.memory import OwnershipMap
from icore.memory.nats._link import link_servers
from icore.memory.nats._reads import _pub_ack
from icore.memory.nats._wire import WireError, WireParser
from icore.net import OwnerUnreachable
from icore.net.nats import NatsCluster, NatsMemory, NatsOwnerAccess, NatsStore
from icore.records import Record, derive

from .conftest import AGENTS, TEAM, make_buckets

Frame = tuple[str, bytes, "bytes | None", bytes]

_tokens = st.text("abcxyz_.$>*0123456789", min_size=1, max_size=12).filter(
    lambda s: " " not in s)
_payload = st.binary(max_size=300)
_hdr = st.builds(lambda status, kv: b"NATS/1.0" + status + b"\r\n" + b"".join(
    b"%s: %s\r\n" % (k.encode(), v.encode()) for k, v in kv) + b"\r\n",
    st.sampled_from([b"", b" 204 EOB", b" 404 No Messages", b" 503"]),
    st.lists(st.tuples(st.sampled_from(["Nats-Subject", "Nats-UpTo-Sequence", "X"]),
                       st.text("0123456789abc", max_size=8)), max_size=4))


@st.composite
def _frames(draw: st.DrawFn) -> tuple[bytes, list[Frame]]:
    """A server byte stream and the frames it holds."""
    out: list[bytes] = []
    want: list[Frame] = []
    for _ in range(draw(st.integers(0, 8))):
        kind = draw(st.sampled_from(["MSG", "HMSG", "PING", "PONG", "+OK", "-ERR", "INFO"]))
        if kind in ("MSG", "HMSG"):
            subject = draw(_tokens).encode()
            reply = draw(st.one_of(st.none(), _tokens)) if draw(st.booleans()) else None
            data = draw(_payload)
            r = b"" if reply is None else b" " + reply.encode()
            if kind == "MSG":
                out.append(b"MSG %s 1%s %d\r\n%s\r\n" % (subject, r, len(data), data))
                want.append(("msg", subject, None, data))
            else:
                hdr = draw(_hdr)
                out.append(b"HMSG %s 1%s %d %d\r\n%s%s\r\n" % (
                    subject, r, len(hdr), len(hdr) + len(data), hdr, data))
                want.append(("msg", subject, hdr, data))
        elif kind == "-ERR":
            out.append(b"-ERR 'Permissions Violation for Publish to x'\r\n")
            want.append(("err", b"Permissions Violation for Publish to x", None, b""))
        elif kind == "INFO":
            out.append(b'INFO {"server_id":"n1","max_payload":1048576}\r\n')
            want.append(("info", b'{"server_id":"n1","max_payload":1048576}', None, b""))
        else:
            out.append(kind.encode() + b"\r\n")
            want.append((kind.lower().strip("+"), b"", None, b""))
    return b"".join(out), want


def _parser(got: list[Frame]) -> WireParser:
    def line(kind: str) -> object:
        return lambda arg: got.append((kind, arg, None, b""))
    return WireParser(lambda s, h, p: got.append(("msg", s, h, p)),
                      on_ping=line("ping"), on_pong=line("pong"),  # type: ignore[arg-type]
                      on_ok=line("ok"), on_err=line("err"),  # type: ignore[arg-type]
                      on_info=line("info"))  # type: ignore[arg-type]


@settings(max_examples=300, deadline=None)
@given(_frames(), st.lists(st.integers(0, 2000), max_size=12))
def test_any_split_of_the_stream_parses_the_same_frames(
        stream: tuple[bytes, list[Frame]], cuts: list[int]) -> None:
    data, want = stream
    got: list[Frame] = []
    p = _parser(got)
    at = sorted({c % (len(data) + 1) for c in cuts})
    for a, b in zip([0, *at], [*at, len(data)], strict=True):
        p.feed(data[a:b])
    assert got == want
    assert p.buffered == 0


@pytest.mark.parametrize("bad", [
    b"HELLO\r\n",
    b"MSG subj 1 notanumber\r\nxx\r\n",
    b"HMSG subj 1 10 5\r\n12345\r\n",  # header longer than the message
    b"MSG subj 1 2\r\nabXY",  # payload not followed by CRLF
    b"MSG a\r\n",
])
def test_malformed_frames_are_refused(bad: bytes) -> None:
    with pytest.raises(WireError):
        _parser([]).feed(bad)


def test_link_servers_skips_credentials_and_other_schemes() -> None:
    """URLs with user credentials stay on nats-py (the link speaks TLS identities only)."""
    assert link_servers(["tls://127.0.0.1:4333", "nats://h"]) == [
        ("127.0.0.1", 4333, "tls://127.0.0.1:4333"), ("h", 4222, "nats://h")]
    assert link_servers(["tls://u:secret@127.0.0.1:4222"]) is None
    assert link_servers(["ws://127.0.0.1:80"]) is None
    assert link_servers([]) is None


OM = OwnershipMap.from_mapping({"req/*": "a", "plan/*": "executor"})
KEYS = [f"req/{i}" for i in range(8)]


@pytest.fixture
def lone(tmp_path: Path, nats_team_certs: Path) -> Iterator[NatsCluster]:
    """A single node of this test's own (it is killed and restarted)."""
    with NatsCluster(tmp_path / "lone", nats_team_certs, AGENTS, team=TEAM) as cl:
        make_buckets(cl, nats_team_certs, "icore")
        yield cl


def _await_stopped(pid: int) -> None:
    """Wait until every thread of ``pid`` is stopped (SIGSTOP takes effect per thread)."""
    deadline = time.monotonic() + 10.0
    while time.monotonic() < deadline:
        states = [(t / "stat").read_text().rsplit(")", 1)[1].split()[0]
                  for t in Path(f"/proc/{pid}/task").iterdir()]
        if all(s == "T" for s in states):
            return
        time.sleep(0.01)
    raise AssertionError("the server did not stop")


@pytest.mark.timeout(120)
def test_server_restart_mid_validation_blocks_then_reconnects(
        lone: NatsCluster, nats_team_certs: Path) -> None:
    """The server dies while a validation waits for its replies: that validation fails
    at once with OwnerUnreachable (the connection was lost; long before its timeout),
    later ones block until the server is back, then the link reconnects and they are
    authorized again."""
    with NatsStore(lone.urls, certs_dir=nats_team_certs, ownership=OM, agent="a",
                   timeout_s=5.0) as store:
        reqs = [Record.create(key=k, owner="a", seq=i + 1, content={"k": k})
                for i, k in enumerate(KEYS)]
        for r in reqs:
            store.commit(r, writer="a")
    plan = derive(key="plan/p", owner="executor", seq=1, content={"do": 1}, inputs=reqs)
    by_id = {r.id: r for r in [*reqs, plan]}

    async def go() -> None:
        mem = await NatsMemory.connect(lone.urls, certs_dir=nats_team_certs,
                                       identity="executor", ownership=OM, timeout_s=5.0)
        try:
            acc = NatsOwnerAccess(mem, identity="executor")

            async def validate(timeout_s: float) -> Outcome:
                d = await avalidate(roots=[plan.id], deps=KEYS, lookup=by_id.get,
                                    ownership=OM, owners=acc, timeout_s=timeout_s)
                return d.outcome
            assert await validate(5.0) is Outcome.AUTHORIZED
            link = mem._reads.link
            assert link is not None and link.connected  # the reads went over the link
            node = lone.nodes[0].proc
            assert node is not None
            os.kill(node.pid, signal.SIGSTOP)  # the request is sent, no reply comes
            _await_stopped(node.pid)
            t0 = time.monotonic()
            q = asyncio.ensure_future(acc.query_heads("a", KEYS, timeout_s=20.0))
            await asyncio.sleep(0.3)
            assert not q.done()
            lone.kill(0)
            with pytest.raises(OwnerUnreachable, match="connection was lost"):
                await q
            assert time.monotonic() - t0 < 10.0  # the drop failed it, not its timeout
            assert not link.connected
            assert await validate(1.0) is Outcome.BLOCKED  # no server: fail closed
            lone.restart(0)
            deadline = time.monotonic() + 30.0
            outcome = Outcome.BLOCKED
            while outcome is not Outcome.AUTHORIZED and time.monotonic() < deadline:
                outcome = await validate(2.0)
                if outcome is not Outcome.AUTHORIZED:
                    await asyncio.sleep(0.2)  # JetStream recovering its streams
            assert outcome is Outcome.AUTHORIZED and link.connected
        finally:
            await mem.close()
    asyncio.run(go())


@given(st.text("KV_abc-xyz09", min_size=1, max_size=20), st.integers(-5, 2**63),
       st.booleans(), st.sampled_from(["", ',"domain":"hub"', ',"duplicate":true']))
def test_barrier_ack_read_without_json_agrees_with_json(
        stream: str, seq: int, same: bool, extra: str) -> None:
    """The acknowledgement's fast form gives what the JSON reading gives (or both
    refuse): another stream, a sequence below 1, or any other shape."""
    body = f'{{"stream":"{stream if same else stream + "x"}","seq":{seq}{extra}}}'.encode()

    def read(data: bytes) -> int | None:
        try:
            return _pub_ack(stream, {}, data)
        except StoreError:
            return None
    got = read(body)
    want = seq if same and seq >= 1 else None
    assert got == want
    spaced = body.replace(b'","seq"', b'", "seq"')  # not the fast form: JSON decides
    assert read(spaced) == want
