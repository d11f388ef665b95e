"""The ``http:`` section of a gateway manifest: who is who over ``--http``.

Under MCP 2026-07-28 a request carries no session; the authenticated principal of its
bearer token is what identifies a client across requests (see docs/mcp.md, "Sessions").
"""

from __future__ import annotations

import re

from pydantic import ConfigDict, Field, field_validator, model_validator

from icore._yaml import ScalarTypes

_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")


class ClientSpec(ScalarTypes):
    """One HTTP client's identity: the bearer token it sends (``Authorization: Bearer``).

    Under MCP 2026-07-28 a request carries no session: the authenticated principal is the
    only identity that lasts across a client's requests, so the gateway ties a client's
    reads to its calls by it (see :class:`HttpSpec`).

    Attributes:
        token_env: the environment variable holding the token (read at start).
        token_sha256: the token's SHA-256, hex (the token itself stays out of the file).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    token_env: str | None = None
    token_sha256: str | None = None

    @model_validator(mode="after")
    def _one(self) -> ClientSpec:
        if (self.token_env is None) == (self.token_sha256 is None):
            raise ValueError("give exactly one of token_env or token_sha256")
        if self.token_sha256 is not None and not re.fullmatch(r"[0-9a-fA-F]{64}",
                                                              self.token_sha256):
            raise ValueError("token_sha256 is the token's SHA-256 as 64 hex digits")
        if self.token_env is not None and not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*",
                                                           self.token_env):
            raise ValueError(f"token_env {self.token_env!r} is not an environment "
                             "variable name")
        return self


class HttpSpec(ScalarTypes):
    """What ``--http`` serves beyond the transport: the clients' identities.

    Attributes:
        clients: client name -> :class:`ClientSpec`. When given, every HTTP request must
            carry one of these bearer tokens (401 otherwise); a request without an MCP
            session (protocol 2026-07-28) is tied to the reads of its client by the
            token's client name. Without it, such a request has no identity and its
            protected calls are refused (fail closed).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    clients: dict[str, ClientSpec] = Field(default_factory=dict)

    @field_validator("clients")
    @classmethod
    def _names(cls, v: dict[str, ClientSpec]) -> dict[str, ClientSpec]:
        for n in v:
            if not _NAME.match(n):
                raise ValueError(f"client name {n!r} must match [A-Za-z0-9_.-]{{1,64}}")
        return v
