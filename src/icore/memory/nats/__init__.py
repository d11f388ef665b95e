"""Owner memory on NATS JetStream: the ``icore[nats]`` store backend (planfence App. A, Alg. 1).

Import this package explicitly (``import icore.memory.nats``): ``icore.memory`` never
imports it, so the library does not need ``nats-py`` unless a team keeps its owner memory
on NATS (``pip install 'icore[nats]'``). :class:`NatsStore` is a
:class:`~icore.memory.Store` like the in-memory and SQLite ones (it passes
``icore.memory.conformance``); :class:`NatsOwnerAccess` is the gate's owner access with
the quorum barrier. The layout in the engine and the commit protocol are described in
``icore.memory.nats._store``; the development servers and the per-agent subject
permissions live in :mod:`icore.net.nats`. docs/nats.md walks through a team.
"""

from icore.memory.nats._names import (
    ADMIN_IDENTITY,
    DEFAULT_PREFIX,
    bucket_names,
    check_nats_agent,
)

try:
    from icore.memory.nats._access import (
        CrossLoopNatsAccess,
        NatsOwnerAccess,
        SyncNatsOwnerAccess,
    )
    from icore.memory.nats._codec import (
        BARRIER_TOKEN,
        MAX_COMMIT_RETRIES,
        NatsStats,
        decode_key,
        encode_key,
    )
    from icore.memory.nats._engine import NatsMemory, connect_nats, create_buckets
    from icore.memory.nats._store import NatsStore
except ImportError as exc:  # pragma: no cover - depends on the installed extras
    raise ImportError("icore.memory.nats needs nats-py: pip install 'icore[nats]'") from exc

__all__ = [
    "ADMIN_IDENTITY",
    "BARRIER_TOKEN",
    "DEFAULT_PREFIX",
    "MAX_COMMIT_RETRIES",
    "CrossLoopNatsAccess",
    "NatsMemory",
    "NatsOwnerAccess",
    "NatsStats",
    "NatsStore",
    "SyncNatsOwnerAccess",
    "bucket_names",
    "check_nats_agent",
    "connect_nats",
    "create_buckets",
    "decode_key",
    "encode_key",
]
