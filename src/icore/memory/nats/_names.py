"""Names in the engine: bucket names, the admin identity, agent ids as subject tokens.

Shared with the server launcher (``icore.net.nats``), which grants each agent's NATS user
its own keys by these names.
"""

from __future__ import annotations

from icore._tls import check_agent_id
from icore.errors import TeamManifestError

ADMIN_IDENTITY = "nats-admin"
"""Certificate name of the user that creates the buckets (full JetStream API)."""
DEFAULT_PREFIX = "icore"
"""Default bucket name prefix: ``<prefix>-heads``, ``<prefix>-records``, ``<prefix>-owners``."""


def bucket_names(prefix: str = DEFAULT_PREFIX) -> tuple[str, str, str]:
    """Return the (heads, records, owners) bucket names for ``prefix``."""
    return f"{prefix}-heads", f"{prefix}-records", f"{prefix}-owners"


def check_nats_agent(agent: str) -> str:
    """Return ``agent`` if it can name a NATS subject token.

    Raises:
        ValueError: not a valid agent id; :class:`~icore.errors.TeamManifestError` (a
            ValueError) when it contains ``.`` (a subject separator: agent ``a`` could
            otherwise be granted ``a.b``'s keys).
    """
    check_agent_id(agent)
    if "." in agent:
        raise TeamManifestError(f"agent id {agent!r} contains '.', which the NATS memory "
                                "backend cannot use as a subject token (use '-' or '_')",
                                agent=agent)
    return agent
