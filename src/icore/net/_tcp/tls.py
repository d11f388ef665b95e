"""TLS 1.3 over memory buffers for protocol-style transports: bytes in, bytes out, counted.

:class:`TlsSession` is the TLS half of a connection without a socket or an event loop:
the transport hands it the ciphertext it read and sends the ciphertext it returns. Every
byte either way is added to a :class:`TrafficStats` (design.md 3.4: handshake flights,
record headers and tags, session tickets and close alerts included), as
:class:`icore.net.SecureChannel` does for stream transports. The asyncio protocols of
the owner server (:mod:`icore.net._tcp.serving`) and the owner client drive it from
``data_received``, so a request costs no task switch and no awaited read (issue 27).
"""

from __future__ import annotations

import ssl

from icore.net._errors import AuthenticationError, ConnectionClosed
from icore.net._stats import TrafficStats
from icore.net._team.pki import identity_of_cert

_READ = 65536


class TlsSession:
    """One end of a mutually authenticated TLS connection, over memory BIOs.

    Args:
        ctx: a context from :func:`icore.net.server_context` or
            :func:`icore.net.client_context`.
        server_side: True on the owner side.
        stats: counters every byte is added to.

    Attributes:
        peer: the authenticated peer's agent id ('' until the handshake is done).
        established: True once the handshake completed.
        closed: True once the peer's close_notify was read.
    """

    __slots__ = ("_flight", "_in", "_obj", "_out", "closed", "established", "peer", "stats")

    def __init__(self, ctx: ssl.SSLContext, *, server_side: bool,
                 stats: TrafficStats) -> None:
        self._in = ssl.MemoryBIO()
        self._out = ssl.MemoryBIO()
        self._obj = ctx.wrap_bio(self._in, self._out, server_side=server_side)
        self.stats = stats
        self.peer = ""
        self.established = False
        self.closed = False
        self._flight = b""

    def outgoing(self) -> bytes:
        """The ciphertext waiting to be sent (counted as sent; ``b""`` when none)."""
        data = self._out.read()
        if data:
            self.stats.bytes_out += len(data)
            if not self.established:
                self.stats.handshake_bytes += len(data)
        if self._flight:  # the handshake's last flight (counted when it was made)
            data, self._flight = self._flight + data, b""
        return data

    def handshake(self, data: bytes = b"") -> bool:
        """Feed handshake ciphertext (may be empty to start); True once established.

        Send :meth:`outgoing` after every call, also when it raises (the alert).

        Raises:
            AuthenticationError: the handshake failed (no certificate, another CA, ...)
                or the peer's certificate carries no agent id.
        """
        if data:
            self.stats.bytes_in += len(data)
            self.stats.handshake_bytes += len(data)
            self._in.write(data)
        try:
            self._obj.do_handshake()
        except ssl.SSLWantReadError:
            return False
        except ssl.SSLError as exc:
            raise AuthenticationError(f"TLS handshake failed: {exc.reason or exc}",
                                      reason=str(exc.reason)) from exc
        self.peer = identity_of_cert(self._obj.getpeercert())
        self._flight = self.outgoing()  # the last flight counts as handshake bytes
        self.established = True
        return True

    def receive(self, data: bytes) -> bytes:
        """Feed ciphertext; return the plaintext it completes (``b""``: none yet).

        After the peer's close_notify, :attr:`closed` is True and the rest is ignored.
        Send :meth:`outgoing` afterwards (TLS 1.3 post-handshake messages may answer).

        Raises:
            AuthenticationError: a TLS alert or a record that does not authenticate.
        """
        self.stats.bytes_in += len(data)
        self._in.write(data)
        obj = self._obj
        chunks: list[bytes] = []
        while self._in.pending or obj.pending():
            try:
                chunk = obj.read(_READ)
            except ssl.SSLWantReadError:
                break  # a partial record: the rest comes with the next read
            except ssl.SSLZeroReturnError:
                self.closed = True
                break
            except ssl.SSLError as exc:
                raise AuthenticationError(f"TLS error: {exc.reason or exc}",
                                          reason=str(exc.reason), peer=self.peer or None
                                          ) from exc
            if not chunk:  # ssl reads the peer's close_notify as b"" (or raises)
                self.closed = True
                break
            chunks.append(chunk)
        if len(chunks) == 1:
            return chunks[0]
        return b"".join(chunks)

    def seal(self, plaintext: bytes) -> bytes:
        """Encrypt ``plaintext``; return the ciphertext to send (counted as sent).

        Raises:
            ConnectionClosed: the session is closed.
        """
        if self.closed:
            raise ConnectionClosed("the peer closed the TLS session", peer=self.peer or None)
        self._obj.write(plaintext)
        data = self._out.read()
        self.stats.bytes_out += len(data)
        return data

    def close(self) -> bytes:
        """Start the TLS close; return the close_notify to send (counted). Never raises."""
        try:
            self._obj.unwrap()
        except (ssl.SSLError, ValueError):
            pass
        try:
            return self.outgoing()
        except Exception:  # closing must not fail
            return b""


__all__ = ["TlsSession"]
