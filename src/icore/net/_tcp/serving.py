"""One owner-service connection as an asyncio protocol (issue 27).

:class:`OwnerConnection` is what :class:`icore.net.OwnerServer` runs per accepted
connection: the loop calls :meth:`~OwnerConnection.data_received` with the ciphertext it
read, the connection decrypts it (:class:`~icore.net._tcp.tls.TlsSession`), cuts it into
messages (the sans-io :class:`~icore.net.FrameDecoder`), answers what it can at once
from the owner's memory and writes the replies of one read in one TLS record and one
socket write, in request order. No task, no awaited read and no future per request: a
head query is answered within the ``data_received`` call that brought it.

Commits join the owner's group commit (:class:`icore.net.GroupCommitter`); their
acknowledgements go out once the group's transaction is durable, and a request that
follows a commit on the same connection is answered only after that commit's reply (a
client sees its own writes). Back-pressure: when the socket's write buffer is full, or
too many replies wait on commits, the connection stops reading until it drains.

Refusals are those of the server's docstring: a failed handshake, an undecodable frame,
a replayed request id or a TLS error closes the connection after logging a
:class:`icore.net.SecurityEvent`; a refused request gets a typed :class:`ErrorReply`.
"""

from __future__ import annotations

import asyncio
import collections
import ssl
from collections.abc import Callable
from typing import Protocol, cast

from icore.net._errors import ConnectionClosed, ProtocolError, TransportError
from icore.net._frames import FrameDecoder, decode_body, encode_frame
from icore.net._handler import OwnerHandler
from icore.net._headwire import HEAD_QUERY_PREFIX, HeadReplyEncoder, decode_head_query
from icore.net._protocol import Commit, ErrorReply, Message, RequestSequence
from icore.net._stats import TrafficStats, error_code_of
from icore.net._tcp.tls import TlsSession
from icore.records import RecordId

MAX_WAITING = 1024
"""Most requests one connection may have waiting on commits before it stops reading."""


class ConnectionHost(Protocol):
    """What a connection needs of its server (:class:`icore.net.OwnerServer`)."""

    handler: OwnerHandler
    head_encoder: HeadReplyEncoder
    ssl_context: ssl.SSLContext
    max_frame_bytes: int
    handshake_timeout_s: float
    stats: TrafficStats

    def submit_commit(self, msg: Commit, peer: str, *, verified: bool = False
                      ) -> asyncio.Future[Message]:
        """Queue a commit in the group commit; the future resolves to its reply.

        ``verified``: ``msg`` was just decoded (its record verified by the decoder).
        """
        ...

    def security_event(self, kind: str, exc: BaseException, peer: str) -> None:
        """Record and log a refused connection or request."""
        ...

    def refused_request(self, reply: ErrorReply, peer: str) -> None:
        """Record a request the handler refused (it already logged it)."""
        ...

    def connection_closed(self, conn: OwnerConnection) -> None:
        """Forget a connection that is gone."""
        ...


class OwnerConnection(asyncio.Protocol):
    """The owner side of one client connection (see the module docstring).

    Args:
        host: the server this connection belongs to.
    """

    def __init__(self, host: ConnectionHost) -> None:
        self.host = host
        self.stats = host.stats
        self.handler = host.handler
        self.max_frame_bytes = host.max_frame_bytes
        self.tls = TlsSession(host.ssl_context, server_side=True, stats=host.stats)
        self.dec = FrameDecoder(max_frame_bytes=host.max_frame_bytes)
        self.seq = RequestSequence()
        self.transport: asyncio.Transport | None = None
        self.closing = False
        self.closed = asyncio.get_running_loop().create_future()
        """Resolves once the connection is lost."""
        self._waiting: collections.deque[Message | asyncio.Future[Message]] = (
            collections.deque())
        """Requests behind an unanswered commit, in order: a request, or a commit's
        future reply."""
        self._paused_writing = False
        self._reading_paused = False
        self._timer: asyncio.TimerHandle | None = None

    # -- asyncio.Protocol -----------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        """Start the handshake clock (the client speaks first in TLS)."""
        self.transport = cast(asyncio.Transport, transport)  # uvloop's is no subclass
        self._timer = asyncio.get_running_loop().call_later(
            self.host.handshake_timeout_s, self._handshake_timeout)

    def data_received(self, data: bytes) -> None:
        """Decrypt, decode, answer: the whole request path of one socket read."""
        if self.closing:
            return
        try:
            if not self.tls.established:
                if not self._handshake(data):
                    return
                data = b""  # requests may follow the client's Finished in the same read
            plain = self.tls.receive(data)
            if plain:
                self._requests(self.dec.bodies(plain))
            else:
                self._write_raw(self.tls.outgoing())  # e.g. a key update's answer
            if self.tls.closed and not self.closing:
                self._peer_closed()
        except ProtocolError as exc:
            self._refuse(exc)
        except TransportError as exc:
            if not isinstance(exc, ConnectionClosed):
                self.host.security_event("protocol", exc, self.tls.peer)
            self.close()
        except Exception as exc:  # a connection must never take the server down
            self.host.security_event("connection", exc, self.tls.peer)
            self.close()

    def eof_received(self) -> bool:
        """The peer closed its side without close_notify: close ours (no event)."""
        self.close(notify=False)
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        """Forget the connection; replies still waiting on commits are dropped."""
        self.closing = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        for w in self._waiting:
            if isinstance(w, asyncio.Future) and w.done() and not w.cancelled():
                w.exception()  # retrieved: nobody will send this reply
        self._waiting.clear()
        if not self.closed.done():
            self.closed.set_result(None)
        self.host.connection_closed(self)

    def pause_writing(self) -> None:
        """The socket's write buffer is full: stop reading requests until it drains."""
        self._paused_writing = True
        self._update_reading()

    def resume_writing(self) -> None:
        """The write buffer drained: read requests again."""
        self._paused_writing = False
        self._update_reading()

    # -- handshake ------------------------------------------------------------------
    def _handshake(self, data: bytes) -> bool:
        """Feed the handshake; True once it is done (the peer authenticated)."""
        try:
            done = self.tls.handshake(data)
        except TransportError as exc:
            self._write_raw(self.tls.outgoing())  # the alert
            self.host.security_event("handshake", exc, "")
            self.close(notify=False)
            return False
        self._write_raw(self.tls.outgoing())
        if done:
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
            self.stats.connections += 1
        return done

    def _handshake_timeout(self) -> None:
        self._timer = None
        if not self.tls.established and not self.closing:
            self.host.security_event("handshake", TimeoutError("TLS handshake timed out"),
                                     "")
            self.close(notify=False)

    # -- requests -------------------------------------------------------------------
    def _requests(self, bodies: list[bytes]) -> None:
        """Answer the frames of one read; one TLS record for every reply ready now.

        A head query is decoded and answered on the hot path (:mod:`icore.net._headwire`:
        no message objects, cached head encodings); any other request is decoded into
        its message and answered by the handler.
        """
        stats = self.stats
        peer = self.tls.peer
        out: list[bytes] = []
        waiting = self._waiting
        last: asyncio.Future[Message] | None = None
        try:
            for body in bodies:
                if body[:3] == HEAD_QUERY_PREFIX and not waiting:
                    q = decode_head_query(body)
                    self.seq.check(q[0])
                    stats.frames_in += 1
                    out.append(self._answer_query(*q, peer))
                    continue
                msg = decode_body(body)
                self.seq.check(msg.rid)
                stats.frames_in += 1
                if isinstance(msg, Commit):
                    # decode_body verified the record: the store does not again
                    last = self.host.submit_commit(msg, peer, verified=True)
                    waiting.append(last)
                elif waiting:
                    waiting.append(msg)  # must see the writes requested before it
                else:
                    out.append(self._answer(msg, peer))
        except ProtocolError as exc:
            self.dec.fail(exc)
            self._refuse(exc, out)  # closes: replies waiting on commits are dropped
            return
        if last is not None:
            # one callback per read, on its last commit: the group committer settles a
            # read's commits in order, and _commit_done re-arms on any reply not ready
            # (issue 27: no callback and loop handle per commit)
            last.add_done_callback(self._commit_done)
        if out:
            self._send(out)
        if len(waiting) > MAX_WAITING:
            self._update_reading()

    def _answer_query(self, rid: int, keys: tuple[str, ...], known: dict[str, RecordId],
                      inline: int, peer: str) -> bytes:
        got = self.handler.head_query(rid, keys, known, inline, peer)
        if isinstance(got, ErrorReply):
            self.host.refused_request(got, peer)
            return self._frame(got)
        self.stats.frames_out += 1
        self.stats.rpcs += 1
        return self.host.head_encoder.encode(rid, *got)

    def _answer(self, msg: Message, peer: str) -> bytes:
        reply = self.handler.handle(msg, peer)
        if isinstance(reply, ErrorReply):
            self.host.refused_request(reply, peer)
        return self._frame(reply)

    def _frame(self, reply: Message) -> bytes:
        self.stats.frames_out += 1
        self.stats.rpcs += 1
        return encode_frame(reply, max_frame_bytes=self.max_frame_bytes)

    def _commit_done(self, _fut: asyncio.Future[Message]) -> None:
        """A commit's group is durable (or failed): send every reply now in order."""
        if self.closing:
            return
        out: list[bytes] = []
        waiting = self._waiting
        peer = self.tls.peer
        try:
            while waiting:
                head = waiting[0]
                if isinstance(head, asyncio.Future):
                    if not head.done():
                        head.add_done_callback(self._commit_done)  # woken when it is
                        break
                    waiting.popleft()
                    reply = head.result()  # a failed group: handled below
                    if isinstance(reply, ErrorReply):
                        self.host.refused_request(reply, peer)
                    out.append(self._frame(reply))
                else:
                    waiting.popleft()
                    out.append(self._answer(head, peer))
        except ProtocolError as exc:
            self._refuse(exc, out)
            return
        except Exception as exc:  # the group's write failed: acknowledge nothing more
            if out:
                self._send(out)
            self.host.security_event("connection", exc, peer)
            self.close()
            return
        if out:
            self._send(out)
        self._update_reading()

    # -- output and closing ---------------------------------------------------------
    def _send(self, frames: list[bytes]) -> None:
        data = self.tls.seal(frames[0] if len(frames) == 1 else b"".join(frames))
        self._write_raw(data)

    def _write_raw(self, data: bytes) -> None:
        t = self.transport
        if data and t is not None and not t.is_closing():
            t.write(data)

    def _update_reading(self) -> None:
        t = self.transport
        if t is None or self.closing:
            return
        pause = self._paused_writing or len(self._waiting) > MAX_WAITING
        if pause and not self._reading_paused:
            self._reading_paused = True
            t.pause_reading()
        elif not pause and self._reading_paused:
            self._reading_paused = False
            t.resume_reading()

    def _refuse(self, exc: ProtocolError, out: list[bytes] | None = None) -> None:
        """Log an undecodable or out-of-order request; send what is ready, the error, close."""
        self.host.security_event("protocol", exc, self.tls.peer)
        frames = list(out or [])
        try:
            frames.append(encode_frame(ErrorReply(0, error_code_of(exc), str(exc)[:1000])))
            self._send(frames)
        except Exception:  # the connection is closing anyway
            pass
        self.close()

    def _peer_closed(self) -> None:
        """The peer's close_notify: a frame cut short is a protocol error, else close."""
        try:
            self.dec.eof()
        except ProtocolError as exc:
            self._refuse(exc)
            return
        self.close()

    def close(self, *, notify: bool = True) -> None:
        """Send close_notify (counted, unless ``notify`` is False) and close. Idempotent."""
        if self.closing:
            return
        self.closing = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        t = self.transport
        if t is None:
            return
        if notify and self.tls.established:
            self._write_raw(self.tls.close())
        t.close()


def connection_factory(host: ConnectionHost) -> Callable[[], OwnerConnection]:
    """The protocol factory :meth:`asyncio.loop.create_server` calls per connection."""
    return lambda: OwnerConnection(host)


__all__ = ["MAX_WAITING", "ConnectionHost", "OwnerConnection", "connection_factory"]
