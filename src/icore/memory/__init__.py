"""Owner-managed versioned public memory (planfence Sec. 3.1, App. A; design.md 3.1).

Stores (in-memory reference and durable SQLite), the ownership map, the owner rules,
heads, a replica cache of other owners' records, and the owner-access interface through
which the gate reaches owners. ``icore.memory.conformance`` is the suite every store
backend passes.
"""

from icore.errors import OwnerUnavailable
from icore.memory._access import (
    DEFAULT_TIMEOUT_S,
    AsyncOwnerAccess,
    HeadReply,
    LocalOwners,
    OwnerAccess,
)
from icore.memory._base import (
    FROM_PARENTS,
    CommitOp,
    CommitResult,
    ExpectedHead,
    HeadEntry,
    Store,
    check_commit_rules,
)
from icore.memory._in_memory import MemoryStore
from icore.memory._ownership import OwnershipMap
from icore.memory._sqlite import SQLiteStore

__all__ = [
    "DEFAULT_TIMEOUT_S",
    "FROM_PARENTS",
    "AsyncOwnerAccess",
    "CommitOp",
    "CommitResult",
    "ExpectedHead",
    "HeadEntry",
    "HeadReply",
    "LocalOwners",
    "MemoryStore",
    "OwnerAccess",
    "OwnerUnavailable",
    "OwnershipMap",
    "SQLiteStore",
    "Store",
    "check_commit_rules",
]
