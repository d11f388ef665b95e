"""Transport errors: the ``TransportError`` branch of the icore error tree.

The classes are defined in :mod:`icore.errors` (so a store backend below net, such as
``icore.memory.nats``, raises the same types) and re-exported here and by ``icore.net``.

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

from icore.errors import (
    AuthenticationError,
    ConnectionClosed,
    FrameTooLarge,
    InvalidRecord,
    MalformedMessage,
    OwnerUnreachable,
    ProtocolError,
    RemoteError,
    RpcTimeout,
    SequenceViolation,
    TransportError,
    TruncatedFrame,
    UnsupportedVersion,
)

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
