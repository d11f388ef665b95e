"""The ``facts:`` section of a gateway manifest: the gateway's own key-value facts.

Who may write a fact (QA r6-oa D2): planfence's owner rule, only the owner writes its
records. ``icore_put_fact`` is allowed to a session that speaks for the fact's owner:
over HTTP the token-named client whose name is the owner or is listed in
``writers[owner]``; over stdio only when ``stdio_speaks_for`` names the owner.
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import ConfigDict, Field, field_validator, model_validator

from icore._yaml import ScalarTypes

FACT_SCHEME = "fact://"
"""URI scheme of the gateway's own key-value facts."""

_OWNER = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,62}$")
"""An owner id: a safe file-name part (a SQLite store is ``<path>/<owner>.db``)."""


def check_owner_id(o: str, what: str) -> None:
    """Refuse an owner id that is no safe file-name part.

    Raises:
        ValueError: ``o`` is not ``[A-Za-z0-9_][A-Za-z0-9_.-]{0,62}``.
    """
    if not isinstance(o, str) or not _OWNER.match(o):
        raise ValueError(f"{what} {o!r} must match [A-Za-z0-9_][A-Za-z0-9_.-]{{0,62}} (it "
                         "names the owner's store file: no '/', no leading '.')")


class _Model(ScalarTypes):
    model_config = ConfigDict(extra="forbid", frozen=True)


class FactsSpec(_Model):
    """The gateway's own key-value facts (served as resources and two tools).

    Attributes:
        owners: fact key (``fact://...``) or glob -> owner id.
        initial: fact key -> initial value (any JSON), committed at start when absent.
        tools: serve ``icore_put_fact`` / ``icore_get_fact`` to clients.
        writers: owner -> names of ``http.clients`` that may write its facts besides
            the client named like the owner (over HTTP, by bearer token).
        stdio_speaks_for: owners whose facts the stdio client may write (none: the
            stdio client writes no fact).
    """

    owners: dict[str, str] = Field(default_factory=dict)
    initial: dict[str, Any] = Field(default_factory=dict)
    tools: bool = True
    writers: dict[str, tuple[str, ...]] = Field(default_factory=dict)
    stdio_speaks_for: tuple[str, ...] = ()

    def may_write(self, owner: str, client: str | None, *, stdio: bool) -> bool:
        """Whether a session speaks for ``owner``: may write its facts.

        Args:
            owner: the fact's owner.
            client: the session's token-named client (HTTP), or None.
            stdio: the session is the stdio client.
        """
        if stdio:
            return owner in self.stdio_speaks_for
        return client is not None and (client == owner
                                       or client in self.writers.get(owner, ()))

    @field_validator("owners", "initial")
    @classmethod
    def _keys(cls, v: dict[str, Any]) -> dict[str, Any]:
        for k in v:
            if not k.startswith(FACT_SCHEME) or len(k) == len(FACT_SCHEME):
                raise ValueError(f"fact key {k!r} must start with {FACT_SCHEME} and name "
                                 "something")
        return v

    @field_validator("owners")
    @classmethod
    def _owner_ids(cls, v: dict[str, str]) -> dict[str, str]:
        for o in v.values():
            check_owner_id(o, "owner")
        return v

    @field_validator("initial")
    @classmethod
    def _json(cls, v: dict[str, Any]) -> dict[str, Any]:
        import json

        from icore.records import MAX_CONTENT_BYTES
        for k, val in v.items():
            try:
                text = json.dumps(val, allow_nan=False)
            except (TypeError, ValueError):
                raise ValueError(f"initial value of {k!r} must be JSON (a string, number, "
                                 "list, mapping, true/false/null), not "
                                 f"{type(val).__name__} {str(val)[:40]!r} (a YAML date, set, "
                                 "binary or .nan is not)") from None
            if len(text) > MAX_CONTENT_BYTES:  # a record's content is at most this
                raise ValueError(f"initial value of {k!r} is {len(text):,} bytes of JSON, "
                                 f"more than a record holds ({MAX_CONTENT_BYTES:,})")
        return v

    @model_validator(mode="after")
    def _owned(self) -> FactsSpec:
        import fnmatch
        for k in self.initial:
            if k not in self.owners and not any(fnmatch.fnmatchcase(k, p)
                                                for p in self.owners):
                raise ValueError(f"initial fact {k!r} has no owner in facts.owners")
        return self
