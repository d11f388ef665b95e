"""Transport errors: the ``TransportError`` branch of the icore error tree.

::

    TransportError                    net: anything between two agents went wrong
    ├── ProtocolError (ValueError)    bytes on the wire are not a valid frame/message
    │   ├── FrameTooLarge             length prefix over the maximum frame size
    │   ├── TruncatedFrame            the stream ended inside a frame
    │   ├── UnsupportedVersion        the frame names another protocol version
    │   ├── MalformedMessage          not msgpack, wrong shape or types, unknown type
    │   ├── InvalidRecord             a carried record fails verification (id != hash)
    │   └── SequenceViolation         a request id was replayed or reordered
    ├── AuthenticationError           TLS failed, or a certificate names the wrong agent
    ├── OwnerUnreachable              also an ``icore.memory.OwnerUnavailable``
    │   └── RpcTimeout                no reply within the RPC timeout (default 2 s)
    ├── ConnectionClosed              the peer closed the connection
    └── RemoteError                   the owner answered with a typed error reply

Every error carries ``code = ErrorCode.TRANSPORT`` plus structured fields (owner, peer,
request id, ...). ``OwnerUnreachable`` subclasses :class:`icore.memory.OwnerUnavailable`
so a gate that treats an unavailable owner as *blocked* (planfence Alg. 1 line 6) needs
no knowledge of the transport.
"""

from __future__ import annotations

from icore.errors import ErrorCode, IcoreError
from icore.memory import OwnerUnavailable


class TransportError(IcoreError):
    """Root of every transport error (design.md 3.4)."""

    code = ErrorCode.TRANSPORT


class ProtocolError(TransportError, ValueError):
    """Bytes received do not form a valid frame or message; the connection is closed."""


class FrameTooLarge(ProtocolError):
    """The length prefix exceeds the maximum frame size."""


class TruncatedFrame(ProtocolError):
    """The byte stream ended in the middle of a frame."""


class UnsupportedVersion(ProtocolError):
    """The frame was written by another protocol version."""


class MalformedMessage(ProtocolError):
    """The frame body is not msgpack, or has the wrong shape, types or message type."""


class InvalidRecord(ProtocolError):
    """A record inside a message is invalid (e.g. its content does not hash to its id)."""


class SequenceViolation(ProtocolError):
    """A request id did not increase on its connection (replayed or reordered)."""


class AuthenticationError(TransportError):
    """TLS handshake failed, or a peer certificate names another agent than expected."""


class OwnerUnreachable(TransportError, OwnerUnavailable):
    """The owner could not be reached (refused, reset, closed, down)."""

    code = ErrorCode.TRANSPORT


class RpcTimeout(OwnerUnreachable):
    """The owner did not answer within the RPC timeout."""


class ConnectionClosed(TransportError):
    """The peer closed the connection."""


class RemoteError(TransportError):
    """The owner answered with an error reply (``fields['remote_code']`` names it)."""


__all__ = [
    "AuthenticationError",
    "ConnectionClosed",
    "FrameTooLarge",
    "InvalidRecord",
    "MalformedMessage",
    "OwnerUnreachable",
    "ProtocolError",
    "RemoteError",
    "RpcTimeout",
    "SequenceViolation",
    "TransportError",
    "TruncatedFrame",
    "UnsupportedVersion",
]
