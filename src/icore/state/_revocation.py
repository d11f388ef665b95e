"""Revocation: an owner revised a cited record (icore Sec. 4; design.md 4.2).

:func:`revocation_bodies` is pure: it reads X through a :class:`RevocationSource` and
returns the log bodies that revoke every active certificate citing another version of a
key (its records or their lineage ancestors), the assertions that evidence reached
(directly, and transitively through assertions citing them: docs/state.md "Revocation
follows derivation"), and one ``revocation`` hard flag naming them. The state records
the bodies (:class:`Revocations`, its revocation part); :mod:`icore.state._transition`
makes the reached obligations ``repair_pending``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Protocol

from icore.records import RecordId
from icore.state._entries import Body, FlagRaised, Revoked
from icore.state._errors import StateInputError
from icore.state._refs import aid
from icore.state._tables import Recorder, Tables
from icore.state._xmodel import Assertion, Certificate, FlagKind, HardFlag


class RevocationSource(Protocol):
    """What :func:`revocation_bodies` reads of X (the state implements it)."""

    @property
    def certificates(self) -> Mapping[str, Certificate]:
        """Π's certificates."""
        ...

    @property
    def assertions(self) -> Mapping[str, Assertion]:
        """Q's assertions."""
        ...

    @property
    def flags(self) -> Mapping[str, HardFlag]:
        """Every hard flag raised."""
        ...

    def certificates_on_key(self, key: str) -> Iterable[str]:
        """Certificates citing a record (or lineage ancestor) of ``key``."""
        ...

    def certificate_active(self, certificate_id: str) -> bool:
        """The certificate passed and was not revoked."""
        ...

    def active_citing_certificate(self, certificate_id: str) -> Iterable[str]:
        """Active assertions whose justification cites the certificate."""
        ...

    def citing_assertion(self, assertion_id: str) -> Iterable[str]:
        """Assertions whose justification cites ``assertion_id``."""
        ...

    def is_active(self, assertion_id: str) -> bool:
        """The assertion exists and is not superseded."""
        ...

    def is_tainted(self, assertion_id: str) -> bool:
        """A revocation already reached the assertion."""
        ...


def revocation_bodies(
    x: RevocationSource, key: str, new_head: RecordId | None, revoked: set[str], n_flags: int
) -> tuple[list[Body], list[HardFlag]]:
    """The bodies revoking ``key``'s stale certificates (pure; X unchanged).

    Args:
        x: the state.
        key: the revised key.
        new_head: its owner's head now (None: no head / owner unavailable; every
            certificate citing the key is then stale, fail closed).
        revoked: certificates revoked by bodies built earlier in the same change
            (updated with the ones revoked here), so several keys can be revoked in one
            transaction.
        n_flags: number of flags those earlier bodies raise (for the next flag id).

    Returns:
        (bodies, flags): a ``Revoked`` body plus, when some assertion depended on the
        evidence, a ``FlagRaised`` body; empty when nothing is stale.
    """
    certs = sorted(
        cid
        for cid in x.certificates_on_key(key)
        if cid not in revoked
        and x.certificate_active(cid)
        and any(
            r.key == key and r.record_id != new_head
            for r in (*x.certificates[cid].records, *x.certificates[cid].lineage)
        )
    )
    if not certs:
        return [], []
    revoked.update(certs)
    direct = {a for cid in certs for a in x.active_citing_certificate(cid)}
    aids = sorted(citing_closure(x, direct), key=_idkey)
    oids = sorted({x.assertions[a].obligation for a in aids})
    bodies: list[Body] = [Revoked(key, new_head, tuple(certs), tuple(aids), tuple(oids))]
    flags: list[HardFlag] = []
    if aids:
        flag = HardFlag(
            id=f"f{len(x.flags) + n_flags + 1}",
            kind=FlagKind.REVOCATION,
            obligations=tuple(oids),
            assertions=tuple(aids),
            certificates=tuple(certs),
            detail=f"owner revised {key!r} (new head {new_head}); cited evidence revoked",
        )
        flags.append(flag)
        bodies.append(FlagRaised(flag))
    return bodies, flags


def citing_closure(x: RevocationSource, aids: Iterable[str]) -> set[str]:
    """``aids`` plus every active assertion that cites one of them, transitively.

    Revoking a stage reaches the work that cited it (docs/state.md).
    """
    out = set(aids)
    stack = list(out)
    while stack:
        for b in x.citing_assertion(stack.pop()):
            if b not in out and x.is_active(b) and not x.is_tainted(b):
                out.add(b)
                stack.append(b)
    return out


def _idkey(s: str) -> tuple[str, int]:
    head = s.rstrip("0123456789")
    tail = s[len(head) :]
    return (head, int(tail) if tail else -1)


class Revocations:
    """Revocation of cited evidence (a part of :class:`~icore.state.State`).

    Reads the citation indexes of X's :class:`~icore.state._tables.Tables`; the state
    itself is the :class:`RevocationSource` the bodies are computed from.

    Args:
        tables: X's tables.
        x: the state.
        record: the state's recorder (one log transaction per call).
    """

    __slots__ = ("_record", "_t", "_x")

    def __init__(self, tables: Tables, x: RevocationSource, record: Recorder) -> None:
        self._t = tables
        self._x = x
        self._record = record

    def on_head_change(self, key: str, new_head: RecordId | None) -> list[HardFlag]:
        """An owner revised ``key``: revoke every active certificate citing another version.

        See ``State.on_head_change`` (icore Sec. 4; design.md 4.2).

        Raises:
            StateInputError: ``new_head`` is neither a record id (str) nor None.
            InterfaceError: an interface misbehaved on a dependent obligation; nothing is
                written and X is unchanged.
        """
        if new_head is not None and not isinstance(new_head, str):
            raise StateInputError(
                f"new head must be a record id or None, not {type(new_head).__name__}",
                key=key,
                new_head=new_head,
            )
        bodies, flags = revocation_bodies(self._x, key, new_head, set(), 0)
        if bodies:
            self._record(bodies)
        return flags

    def revalidate_certificates(
        self, head_view: Callable[[str], RecordId | None]
    ) -> list[HardFlag]:
        """Check every cited key against ``head_view``; revoke stale certificates in one change.

        See ``State.revalidate_certificates``.

        Raises:
            StateInputError: ``head_view`` returned something that is neither a record id
                (str) nor None; nothing is written.
            InterfaceError: an interface misbehaved on a dependent obligation; nothing is
                written and X is unchanged.
        """
        heads = {key: head_view(key) for key in self.cited_keys()}
        for key, head in heads.items():
            if head is not None and not isinstance(head, str):
                raise StateInputError(
                    f"head_view returned {type(head).__name__}, not a record id or None",
                    key=key,
                )
        bodies: list[Body] = []
        flags: list[HardFlag] = []
        revoked: set[str] = set()
        for key, head in heads.items():
            b, f = revocation_bodies(self._x, key, head, revoked, len(flags))
            bodies += b
            flags += f
        if bodies:
            self._record(bodies)
        return flags

    def cited_keys(self) -> list[str]:
        """Keys cited by some certificate (records or lineage), sorted."""
        return sorted(self._t.certs_by_key)

    def certificates_on_key(self, key: str) -> Iterable[str]:
        """Certificates citing a record (or lineage ancestor) of ``key``."""
        return self._t.certs_by_key.get(key, ())

    def active_citing_certificate(self, certificate_id: str) -> Iterable[str]:
        """Active assertions whose justification cites the certificate."""
        return tuple(aid(r) for r in self._t.active_by_cert.get(certificate_id, ()))

    def citing_assertion(self, assertion_id: str) -> Iterable[str]:
        """Assertions whose justification cites ``assertion_id``."""
        return self._t.cited_by.get(assertion_id, ())

    def is_tainted(self, assertion_id: str) -> bool:
        """A revocation reached the assertion (directly or through what it cites)."""
        return assertion_id in self._t.tainted
