"""The NATS client protocol's server-to-client frames, parsed from a byte stream (#27).

Pure (no I/O): :class:`WireParser` takes the bytes a connection receives, in chunks of
any size, and hands each complete frame to its callbacks. Frames (NATS client protocol,
text control lines ending in CRLF):

* ``MSG <subject> <sid> [reply] <#bytes>`` CRLF payload CRLF;
* ``HMSG <subject> <sid> [reply] <#header bytes> <#total bytes>`` CRLF header block
  payload CRLF (the header block starts ``NATS/1.0`` and ends with an empty line);
* ``PING``, ``PONG``, ``+OK``, ``-ERR '<text>'``, ``INFO {json}``.

A message is handed on as (subject, header block or None, payload), all ``bytes``; no
object per message, no header parsing (the reader of the reply does that, see
:func:`icore.memory.nats._reads.parse_headers`).
"""

from __future__ import annotations

from collections.abc import Callable

from icore.errors import StoreError

MAX_CONTROL_LINE = 4096
"""Longest control line accepted (nats-server's own limit is 4 KiB)."""
MAX_PAYLOAD = 64 * 1024 * 1024
"""Largest message accepted, bytes (nats-server's ``max_payload`` is at most 64 MiB)."""

OnMsg = Callable[[bytes, "bytes | None", bytes], None]
"""A message's handler: (subject, raw header block or None, payload)."""
OnLine = Callable[[bytes], None]
"""A control frame's handler: its argument (``INFO``'s JSON, ``-ERR``'s text, or b"")."""


class WireError(StoreError):
    """The byte stream is not the NATS protocol (the connection must be closed)."""


class WireParser:
    """Server frames from a byte stream split anywhere (see the module docstring).

    Args:
        on_msg: called per ``MSG``/``HMSG`` with (subject, header block or None, payload).
        on_ping / on_pong / on_ok: called per ``PING``, ``PONG``, ``+OK`` (with b"").
        on_err: called per ``-ERR`` with its text (quotes stripped).
        on_info: called per ``INFO`` with its JSON bytes.

    :meth:`feed` keeps an incomplete frame's bytes until the rest arrives. A callback that
    raises ends :meth:`feed` with its error and drops the bytes after that frame (the
    connection is to be closed then, like after a :class:`WireError`).
    """

    __slots__ = (
        "_need",
        "_rest",
        "on_err",
        "on_info",
        "on_msg",
        "on_ok",
        "on_ping",
        "on_pong",
    )

    def __init__(self, on_msg: OnMsg, *, on_ping: OnLine, on_pong: OnLine,
                 on_ok: OnLine, on_err: OnLine, on_info: OnLine) -> None:
        self._rest = b""
        self._need = 0  # bytes the buffered frame needs in all (0: not known yet)
        self.on_msg, self.on_ping, self.on_pong = on_msg, on_ping, on_pong
        self.on_ok, self.on_err, self.on_info = on_ok, on_err, on_info

    @property
    def buffered(self) -> int:
        """Bytes of an incomplete frame held back."""
        return len(self._rest)

    def feed(self, data: bytes) -> None:
        """Parse ``data`` (the next bytes of the stream); call back per complete frame.

        Raises:
            WireError: a malformed or unknown control line, an over-long line or payload,
                or a payload not followed by CRLF.
        """
        if self._rest:
            if self._need and len(self._rest) + len(data) < self._need:
                self._rest += data  # still incomplete: nothing to parse yet
                return
            data = self._rest + data
            self._rest = b""
        self._need = 0
        n = len(data)
        pos = 0
        find = data.find
        while pos < n:
            end = find(b"\r\n", pos)
            if end < 0:
                if n - pos > MAX_CONTROL_LINE:
                    raise WireError("NATS control line too long", length=n - pos)
                break
            c = data[pos]
            if c == 0x4D or c == 0x48:  # MSG / HMSG
                args = data[pos:end].split(b" ")
                try:
                    if c == 0x4D and args[0] == b"MSG" and len(args) in (4, 5):
                        hlen, total = 0, int(args[-1])
                    elif args[0] == b"HMSG" and len(args) in (5, 6):
                        hlen, total = int(args[-2]), int(args[-1])
                    else:
                        raise ValueError
                except ValueError:
                    raise WireError("malformed NATS message line",
                                    line=repr(data[pos:min(end, pos + 120)])) from None
                if not 0 <= hlen <= total <= MAX_PAYLOAD:
                    raise WireError("NATS message size out of range", header=hlen,
                                    total=total)
                start = end + 2
                stop = start + total
                if stop + 2 > n:
                    self._need = stop + 2 - pos
                    break
                if data[stop:stop + 2] != b"\r\n":
                    raise WireError("NATS message payload not followed by CRLF")
                pos = stop + 2
                if hlen:
                    self.on_msg(args[1], data[start:start + hlen], data[start + hlen:stop])
                else:
                    self.on_msg(args[1], None, data[start:stop])
                continue
            line = data[pos:end]
            pos = end + 2
            if line == b"PING":
                self.on_ping(b"")
            elif line == b"PONG":
                self.on_pong(b"")
            elif line == b"+OK":
                self.on_ok(b"")
            elif line.startswith(b"-ERR"):
                self.on_err(line[4:].strip().strip(b"'"))
            elif line.startswith(b"INFO "):
                self.on_info(line[5:].strip())
            else:
                raise WireError("unknown NATS protocol line", line=repr(line[:120]))
        if pos < n:
            self._rest = data[pos:]
