"""Owner memory services across processes (planfence Sec. 4, App. A; design.md 2, 3.4).

* a sans-io protocol: messages, a length-prefixed msgpack frame codec with a protocol
  version and a maximum frame size, and a stream decoder whose every failure is a typed
  :class:`ProtocolError`;
* transports under the owner-access interface of :mod:`icore.memory`: asyncio TCP with
  mutual TLS 1.3 (:class:`OwnerClient`, :class:`SyncOwnerClient`, :class:`OwnerServer`);
* team PKI (:func:`init_team_certs`), the team manifest (:class:`TeamManifest`) and a team
  launcher (:class:`TeamProcesses`);
* owner memory on NATS JetStream, in the submodule :mod:`icore.net.nats` (extra
  ``icore[nats]``; imported explicitly, so this package never needs nats-py).

See docs/net.md ("API at a glance").
"""

from icore.net._channel import SecureChannel, Shaper
from icore.net._errors import (
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
from icore.net._handler import DEFAULT_INLINE_CAP_BYTES, OwnerHandler
from icore.net._manifest import MemorySpec, TeamAgentSpec, TeamManifest, TeamManifestError
from icore.net._pki import (
    AGENT_ID_RE,
    check_agent_id,
    client_context,
    identity_of_cert,
    init_team_certs,
    server_context,
)
from icore.net._protocol import (
    HEADER_BYTES,
    MAX_FRAME_BYTES,
    PROTOCOL_VERSION,
    Ack,
    Announce,
    Commit,
    CommitAck,
    ErrorReply,
    FetchReply,
    FetchRequest,
    FrameDecoder,
    HeadQuery,
    HeadReplyMsg,
    Message,
    MsgType,
    Ping,
    Pong,
    Replicate,
    RequestSequence,
    decode_body,
    decode_frame,
    encode_body,
    encode_frame,
    frame_size,
)
from icore.net._stats import TrafficStats
from icore.net._tcp_client import OwnerClient
from icore.net._tcp_server import (
    DEFAULT_HANDSHAKE_TIMEOUT_S,
    GroupCommitter,
    OwnerServer,
    SecurityEvent,
)
from icore.net._tcp_sync import ServerThread, SyncOwnerClient
from icore.net._team import TeamAgentProcess, TeamProcesses, serve_agent

__all__ = [
    "AGENT_ID_RE",
    "DEFAULT_HANDSHAKE_TIMEOUT_S",
    "DEFAULT_INLINE_CAP_BYTES",
    "HEADER_BYTES",
    "MAX_FRAME_BYTES",
    "PROTOCOL_VERSION",
    "Ack",
    "Announce",
    "AuthenticationError",
    "Commit",
    "CommitAck",
    "ConnectionClosed",
    "ErrorReply",
    "FetchReply",
    "FetchRequest",
    "FrameDecoder",
    "FrameTooLarge",
    "GroupCommitter",
    "HeadQuery",
    "HeadReplyMsg",
    "InvalidRecord",
    "MalformedMessage",
    "MemorySpec",
    "Message",
    "MsgType",
    "OwnerClient",
    "OwnerHandler",
    "OwnerServer",
    "OwnerUnreachable",
    "Ping",
    "Pong",
    "ProtocolError",
    "RemoteError",
    "Replicate",
    "RequestSequence",
    "RpcTimeout",
    "SecureChannel",
    "SecurityEvent",
    "SequenceViolation",
    "ServerThread",
    "Shaper",
    "SyncOwnerClient",
    "TeamAgentProcess",
    "TeamAgentSpec",
    "TeamManifest",
    "TeamManifestError",
    "TeamProcesses",
    "TrafficStats",
    "TransportError",
    "TruncatedFrame",
    "UnsupportedVersion",
    "check_agent_id",
    "client_context",
    "decode_body",
    "decode_frame",
    "encode_body",
    "encode_frame",
    "frame_size",
    "identity_of_cert",
    "init_team_certs",
    "serve_agent",
    "server_context",
]
