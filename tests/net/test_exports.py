"""The public API of icore.net is pinned (style habit 2) and layered (design.md 2)."""

from __future__ import annotations

import ast
from pathlib import Path

import icore.net

PINNED = sorted("""
DEFAULT_HANDSHAKE_TIMEOUT_S DEFAULT_INLINE_CAP_BYTES HEADER_BYTES MAX_FRAME_BYTES
PROTOCOL_VERSION AGENT_ID_RE Ack TeamAgentProcess TeamAgentSpec Announce AuthenticationError
Commit CommitAck ConnectionClosed ErrorReply FetchReply FetchRequest FrameDecoder
FrameTooLarge GroupCommitter HeadQuery HeadReplyMsg InvalidRecord LinkModel MalformedMessage
TeamManifestError MemorySpec Message MsgType OwnerClient OwnerHandler OwnerServer
OwnerUnreachable PathModel Ping Pong ProtocolError RemoteError Replicate RequestSequence RpcTimeout
SecureChannel SecurityEvent SequenceViolation ServerThread Shaper SyncOwnerClient
TeamManifest TeamProcesses TrafficStats TransportError TruncatedFrame UnsupportedVersion
check_agent_id client_context decode_body decode_frame encode_body encode_frame frame_size
identity_of_cert init_team_certs serve_agent server_context
""".split())

SRC = Path(icore.net.__file__).resolve().parent
ALLOWED = {"icore.errors", "icore._clock", "icore.records", "icore.memory", "icore.fence",
           "icore.net", "icore._data", "icore._files", "icore._extras", "icore._tls",
           "icore._threads", "icore._frozen", "icore._msgpack", "icore._yaml"}
IO = {"socket", "ssl", "asyncio", "time", "subprocess", "sqlite3", "selectors"}


def test_exports_pinned() -> None:
    """``icore.net.__all__`` equals the pinned list and every name resolves."""
    assert sorted(icore.net.__all__) == PINNED
    for name in icore.net.__all__:
        assert hasattr(icore.net, name), name


def _imports(path: Path) -> set[str]:
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.add(node.module)
    return out


def test_layering() -> None:
    """icore.net imports only lower layers; the protocol does no I/O."""
    for path in SRC.rglob("*.py"):
        for mod in _imports(path):
            if mod == "icore" or mod.startswith("icore."):
                assert any(mod == a or mod.startswith(a + ".") for a in ALLOWED), (path, mod)
    for pure in ("_protocol.py", "_frames.py", "_errors.py"):
        assert not {m.split(".")[0] for m in _imports(SRC / pure)} & IO, pure


def test_transports_implement_owner_access() -> None:
    """The sync and async TCP clients satisfy the memory layer's protocols by signature."""
    from icore.memory import AsyncOwnerAccess, OwnerAccess

    cls = icore.net.SyncOwnerClient
    assert {"query_heads", "fetch"} <= set(dir(cls))
    assert issubclass(cls, OwnerAccess)
    assert issubclass(icore.net.OwnerClient, AsyncOwnerAccess)
