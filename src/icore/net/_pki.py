"""Team PKI: one team CA and one certificate per agent; mutual TLS 1.3 contexts.

``icore certs init`` calls :func:`init_team_certs`. Keys are ECDSA P-256 (small
certificates keep handshakes cheap, planfence Fig. 2). An agent's identity is the common
name of its certificate; servers take the writer of every commit from it, and clients
check that the server they reached is the owner they asked (design.md 3.4, "an agent's
certificate identity must equal the writer it claims").

Layout of a certs folder::

    ca.crt  ca.key            team CA (keep ca.key offline in real deployments)
    <agent>.crt <agent>.key   one pair per agent (private keys are mode 0600)
"""

from __future__ import annotations

import datetime as dt
import hashlib
import ipaddress
import os
import re
import ssl
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from icore._files import not_a_regular_file
from icore.net._errors import AuthenticationError

AGENT_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$")
"""Allowed agent ids (they name certificate files and appear in certificates)."""


def check_agent_id(agent: str) -> str:
    """Return ``agent`` if it is a valid agent id.

    Raises:
        ValueError: not 1-63 characters of ``[A-Za-z0-9._-]`` starting alphanumeric.
    """
    if not isinstance(agent, str) or not AGENT_ID_RE.match(agent):
        raise ValueError(f"invalid agent id {agent!r}: use 1-63 chars [A-Za-z0-9._-]")
    return agent


def _write_key(path: Path, key: ec.EllipticCurvePrivateKey) -> None:
    data = key.private_bytes(serialization.Encoding.PEM,
                             serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)


def _load_key(path: Path) -> ec.EllipticCurvePrivateKey:
    key = serialization.load_pem_private_key(path.read_bytes(), password=None)
    if not isinstance(key, ec.EllipticCurvePrivateKey):
        raise ValueError(f"{path} is not an EC private key")
    return key


MAX_NAME_BYTES = 64
"""Longest x509 common name / organization name (RFC 5280 ub-common-name), UTF-8 bytes."""
MAX_CERT_DAYS = 36500
"""Longest certificate validity accepted, in days (100 years; x509 ends at year 9999)."""


def x509_name(text: str) -> str:
    """``text`` if it fits an x509 name (64 UTF-8 bytes), else a stable short form.

    A longer name keeps its longest prefix that fits in 51 bytes (whole characters) and
    a ``~`` plus 12 hex digits of the SHA-256 of the whole name, so the same team or
    agent always gets the same name and two long names stay apart.
    """
    raw = text.encode("utf-8")
    if len(raw) <= MAX_NAME_BYTES:
        return text
    digest = hashlib.sha256(raw).hexdigest()[:12]
    head = raw[:MAX_NAME_BYTES - 13].decode("utf-8", errors="ignore")
    return f"{head}~{digest}"


def check_days(days: int) -> int:
    """Return ``days`` if it is a certificate validity icore can issue.

    Raises:
        ValueError: not an integer in ``[1, MAX_CERT_DAYS]``.
    """
    if isinstance(days, bool) or not isinstance(days, int) or not 1 <= days <= MAX_CERT_DAYS:
        raise ValueError(f"certificate validity must be 1..{MAX_CERT_DAYS} days, not {days!r}")
    return days


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def _make_ca(team: str, days: int) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, x509_name(f"{team} CA")),
                      x509.NameAttribute(NameOID.ORGANIZATION_NAME, x509_name(team))])
    now = _now()
    cert = (
        x509.CertificateBuilder()
        .subject_name(name).issuer_name(name).public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(x509.KeyUsage(digital_signature=False, content_commitment=False,
                                     key_encipherment=False, data_encipherment=False,
                                     key_agreement=False, key_cert_sign=True, crl_sign=True,
                                     encipher_only=False, decipher_only=False), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()),
                       critical=False)
        .sign(key, hashes.SHA256())
    )
    return key, cert


def _make_agent(agent: str, team: str, ca_key: ec.EllipticCurvePrivateKey,
                ca_cert: x509.Certificate, days: int
                ) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    key = ec.generate_private_key(ec.SECP256R1())
    now = _now()
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, agent),
                                 x509.NameAttribute(NameOID.ORGANIZATION_NAME,
                                                    x509_name(team))]))
        .issuer_name(ca_cert.subject).public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.SubjectAlternativeName([
            x509.DNSName("localhost"),
            x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
        ]), critical=False)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH,
                                              ExtendedKeyUsageOID.CLIENT_AUTH]),
                       critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(
            ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    return key, cert


def init_team_certs(out_dir: str | os.PathLike[str], agents: Sequence[str], *,
                    team: str = "icore-team", days: int = 365,
                    overwrite: bool = False) -> Path:
    """Create a team CA (unless present) and a certificate per agent in ``out_dir``.

    An existing CA is reused, so agents can be added later; an existing agent pair is
    kept unless ``overwrite``.

    Args:
        out_dir: the certs folder (created).
        agents: agent ids (see :data:`AGENT_ID_RE`).
        team: team name written into the certificates.
        days: validity in days.
        overwrite: replace existing agent certificates (and the CA when it is new).

    Returns:
        The certs folder.

    Raises:
        ValueError: an invalid agent id, ``days`` outside ``1..MAX_CERT_DAYS``,
            ``out_dir`` is a file, or an existing CA that does not load (including
            a ``ca.key``/``ca.crt`` that is not a regular file, such as a FIFO: refused
            by kind without opening it).
    """
    for a in agents:
        check_agent_id(a)
    check_days(days)
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise ValueError(f"the certs folder {out} is a file, not a folder")
    out.mkdir(parents=True, exist_ok=True)
    ca_crt, ca_keyp = out / "ca.crt", out / "ca.key"
    if ca_crt.exists() and ca_keyp.exists() and not overwrite:
        try:
            for p in (ca_keyp, ca_crt):
                # a FIFO would block the read forever: refuse it by kind, unopened
                if (problem := not_a_regular_file(p)) is not None:
                    raise ValueError(f"{p} {problem}")
            ca_key = _load_key(ca_keyp)
            ca_cert = x509.load_pem_x509_certificate(ca_crt.read_bytes())
        except ValueError as exc:
            raise ValueError(f"cannot load the team CA in {out} (use --force to replace "
                             f"it): {exc}") from exc
    else:
        ca_key, ca_cert = _make_ca(team, days)
        _write_key(ca_keyp, ca_key)
        ca_crt.write_bytes(ca_cert.public_bytes(serialization.Encoding.PEM))
    for a in agents:
        crt, keyp = out / f"{a}.crt", out / f"{a}.key"
        if crt.exists() and keyp.exists() and not overwrite:
            continue
        key, cert = _make_agent(a, team, ca_key, ca_cert, days)
        _write_key(keyp, key)
        crt.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return out


def _paths(certs_dir: str | os.PathLike[str], agent: str) -> tuple[Path, Path, Path]:
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
    """
    ca, crt, key = _paths(certs_dir, agent)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_3
    ctx.load_cert_chain(crt, key)
    ctx.load_verify_locations(cafile=str(ca))
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
    """
    ca, crt, key = _paths(certs_dir, agent)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_3
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_REQUIRED
    ctx.load_cert_chain(crt, key)
    ctx.load_verify_locations(cafile=str(ca))
    return ctx


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
