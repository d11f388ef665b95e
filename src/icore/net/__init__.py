"""Owner memory services across processes (planfence Sec. 4, App. A; design.md 2, 3.4).

* a sans-io protocol: messages, a length-prefixed msgpack frame codec with a protocol
  version and a maximum frame size, and a stream decoder whose every failure is a typed
  :class:`ProtocolError`;
* a network model: :class:`Loopback`, :class:`FixedLink`, trace-driven :class:`TraceLink`;
* transports under the owner-access interface of :mod:`icore.memory`: in-process on
  virtual time (:class:`VirtualTransport`, :class:`AsyncVirtualTransport`) and asyncio
  TCP with mutual TLS 1.3 (:class:`OwnerClient`, :class:`SyncOwnerClient`,
  :class:`OwnerServer`);
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
from icore.net._links import (
    DEFAULT_ATT_TRACE,
    DEFAULT_BASE_DELAY_MS,
    DEFAULT_RTO_MS,
    LINK_NAMES,
    PACKET_BYTES,
    SEGMENT_HEADER_BYTES,
    SEGMENT_PAYLOAD_BYTES,
    TRACE_FILES,
    FixedLink,
    Link,
    LinkPair,
    Loopback,
    TraceLink,
    default_att_trace,
    link_by_name,
    path_by_name,
    traces_dir,
    wire_bytes,
)
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
from icore.net._virtual import (
    DEFAULT_TLS_COST,
    AsyncVirtualTransport,
    HostCost,
    HostCpu,
    TlsCost,
    VirtualTransport,
)
from icore.net._vloop import VirtualTimeLoop, run_virtual

__all__ = [
    "AGENT_ID_RE",
    "DEFAULT_ATT_TRACE",
    "DEFAULT_BASE_DELAY_MS",
    "DEFAULT_HANDSHAKE_TIMEOUT_S",
    "DEFAULT_INLINE_CAP_BYTES",
    "DEFAULT_RTO_MS",
    "DEFAULT_TLS_COST",
    "HEADER_BYTES",
    "LINK_NAMES",
    "MAX_FRAME_BYTES",
    "PACKET_BYTES",
    "PROTOCOL_VERSION",
    "SEGMENT_HEADER_BYTES",
    "SEGMENT_PAYLOAD_BYTES",
    "TRACE_FILES",
    "Ack",
    "Announce",
    "AsyncVirtualTransport",
    "AuthenticationError",
    "Commit",
    "CommitAck",
    "ConnectionClosed",
    "ErrorReply",
    "FetchReply",
    "FetchRequest",
    "FixedLink",
    "FrameDecoder",
    "FrameTooLarge",
    "GroupCommitter",
    "HeadQuery",
    "HeadReplyMsg",
    "HostCost",
    "HostCpu",
    "InvalidRecord",
    "Link",
    "LinkPair",
    "Loopback",
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
    "TlsCost",
    "TraceLink",
    "TrafficStats",
    "TransportError",
    "TruncatedFrame",
    "UnsupportedVersion",
    "VirtualTimeLoop",
    "VirtualTransport",
    "check_agent_id",
    "client_context",
    "decode_body",
    "decode_frame",
    "default_att_trace",
    "encode_body",
    "encode_frame",
    "frame_size",
    "identity_of_cert",
    "init_team_certs",
    "link_by_name",
    "path_by_name",
    "run_virtual",
    "serve_agent",
    "server_context",
    "traces_dir",
    "wire_bytes",
]
