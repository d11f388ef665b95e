"""Reading a team's TLS material: mutual TLS 1.3 contexts and certificate identities.

Shared by the transports (``icore.net``) and the store backends that connect to an engine
with a team certificate (``icore.memory.nats``). A certs folder (made by ``icore certs
init``, see :func:`icore.net.init_team_certs`) holds ``ca.crt`` and one ``<agent>.crt`` /
``<agent>.key`` pair per agent; an agent's identity is the common name of its
certificate (design.md 3.4).
"""

from __future__ import annotations

import os
import re
import ssl
from pathlib import Path
from typing import Any

from icore.errors import AuthenticationError, TeamManifestError

AGENT_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$")
"""Allowed agent ids (they name certificate files and appear in certificates)."""


RESERVED_AGENT_ID = "ca"
"""The id no agent may have (any case): ``ca.crt``/``ca.key`` are the team CA's files."""


def check_agent_id(agent: str) -> str:
    """Return ``agent`` if it is a valid agent id.

    Raises:
        TeamManifestError: not 1-63 characters of ``[A-Za-z0-9._-]`` starting
            alphanumeric, or ``ca`` in any case (its files would be the team CA's
            ``ca.crt``/``ca.key``: certifying it replaced the CA, #29) (a ``ValueError``;
            field ``agent``).
    """
    if not isinstance(agent, str) or not AGENT_ID_RE.fullmatch(agent):
        raise TeamManifestError(f"invalid agent id {agent!r:.80}: use 1-63 chars "
                                "[A-Za-z0-9._-]", field="agent")
    if agent.casefold() == RESERVED_AGENT_ID:
        raise TeamManifestError(f"invalid agent id {agent!r}: the name of the team CA's "
                                "files (ca.crt, ca.key); choose another id", field="agent")
    return agent


def _paths(certs_dir: str | os.PathLike[str], agent: str) -> tuple[Path, Path, Path]:
    if not isinstance(certs_dir, str | os.PathLike) or "\x00" in os.fspath(certs_dir):
        raise TeamManifestError(f"certs_dir must name a folder (a str or path without "
                                f"NUL), got {certs_dir!r:.80}", field="certs_dir")
    d = Path(certs_dir)
    check_agent_id(agent)
    if d.exists() and not d.is_dir():
        raise NotADirectoryError(f"the certs folder {d} is a file, not a folder (give the "
                                 "folder `icore certs init` wrote)")
    ca, crt, key = d / "ca.crt", d / f"{agent}.crt", d / f"{agent}.key"
    for p in (ca, crt, key):
        if not p.is_file():
            raise FileNotFoundError(f"missing {p} (run `icore certs init`)")
    return ca, crt, key


def server_context(certs_dir: str | os.PathLike[str], agent: str) -> ssl.SSLContext:
    """Return a TLS 1.3 server context that requires a client certificate from the CA.

    Raises:
        FileNotFoundError: the CA or the agent's pair is missing.
        AuthenticationError: a file is not a PEM certificate or key, or the certificate
            does not match the key (the message names the files).
        TeamManifestError: ``certs_dir`` is no ``str`` or path (or holds a NUL), or the
            agent id is invalid (:func:`check_agent_id`).
    """
    ca, crt, key = _paths(certs_dir, agent)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_3
    _load(ctx, ca, crt, key, agent)
    ctx.verify_mode = ssl.CERT_REQUIRED
    # no session resumption is used, so session tickets would be ~1.4 KB of dead weight
    # on every new connection (the paper's new-connection-per-RPC setting)
    ctx.num_tickets = 0
    return ctx


def client_context(certs_dir: str | os.PathLike[str], agent: str) -> ssl.SSLContext:
    """Return a TLS 1.3 client context presenting ``agent``'s certificate.

    The server's identity is checked against the owner asked by :func:`peer_identity`
    (not by host name: every agent may run on 127.0.0.1).

    Raises:
        FileNotFoundError: the CA or the agent's pair is missing.
        AuthenticationError: as :func:`server_context`.
        TeamManifestError: as :func:`server_context`.
    """
    ca, crt, key = _paths(certs_dir, agent)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_3
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_REQUIRED
    _load(ctx, ca, crt, key, agent)
    return ctx


def _load(ctx: ssl.SSLContext, ca: Path, crt: Path, key: Path, agent: str) -> None:
    """Load the agent's pair and the CA; a bad file is named (issue 29).

    OpenSSL's own messages (``[SSL] PEM lib``, ``KEY_VALUES_MISMATCH``) name no file.

    Raises:
        AuthenticationError: naming the file that is not a PEM certificate or key, or
            the certificate and key that do not match.
    """
    try:
        ctx.load_cert_chain(crt, key)
    except ssl.SSLError as exc:
        raise AuthenticationError(f"agent {agent}: cannot use its key pair: "
                                  f"{_pair_problem(crt, key, exc)}; remake it with "
                                  "`icore certs init --force`", agent=agent,
                                  cert=str(crt), key=str(key)) from None
    try:
        ctx.load_verify_locations(cafile=str(ca))
    except ssl.SSLError as exc:
        why = exc.reason or str(exc)
        raise AuthenticationError(f"the team CA {ca} is not a PEM certificate ({why})",
                                  agent=agent, cert=str(ca)) from None


def _pair_problem(crt: Path, key: Path, exc: ssl.SSLError) -> str:
    """Which file of a refused pair is wrong (read again with ``cryptography``)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import serialization

    try:
        cert = x509.load_pem_x509_certificate(crt.read_bytes())
    except (ValueError, OSError):
        return f"{crt} is not a PEM certificate"
    try:
        pkey = serialization.load_pem_private_key(key.read_bytes(), password=None)
    except (ValueError, TypeError, OSError):
        return f"{key} is not a PEM private key (without a password)"
    fmt = (serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    if cert.public_key().public_bytes(*fmt) != pkey.public_key().public_bytes(*fmt):
        return f"the certificate {crt} is not the one of the key {key} (swapped files?)"
    return f"{crt} / {key}: {exc.reason or exc}"


def identity_of_cert(cert: dict[str, Any] | None) -> str:
    """Return the agent id (common name) of a verified peer certificate.

    Raises:
        AuthenticationError: no certificate, or no single common name.
    """
    if not cert:
        raise AuthenticationError("peer presented no certificate")
    cns = [v for rdn in cert.get("subject", ()) for (k, v) in rdn if k == "commonName"]
    if len(cns) != 1 or not isinstance(cns[0], str) or not AGENT_ID_RE.match(cns[0]):
        raise AuthenticationError("peer certificate has no valid agent common name",
                                  subject=str(cert.get("subject"))[:200])
    return cns[0]
