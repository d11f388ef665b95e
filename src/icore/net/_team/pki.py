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

import contextlib
import datetime as dt
import hashlib
import ipaddress
import os
from collections.abc import Iterable, Sequence
from pathlib import Path

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from icore._files import folder_turn, not_a_regular_file, written_path_problem
from icore._tls import (
    AGENT_ID_RE,
    RESERVED_AGENT_ID,
    check_agent_id,
    client_context,
    identity_of_cert,
    server_context,
)
from icore.errors import TeamManifestError


def _write_whole(path: Path, data: bytes, mode: int) -> None:
    """Write ``path`` whole or not at all (a temporary file renamed over it)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise


def _write_key(path: Path, key: ec.EllipticCurvePrivateKey) -> None:
    _write_whole(path, key.private_bytes(serialization.Encoding.PEM,
                                         serialization.PrivateFormat.PKCS8,
                                         serialization.NoEncryption()), 0o600)


def _write_cert(path: Path, cert: x509.Certificate) -> None:
    _write_whole(path, cert.public_bytes(serialization.Encoding.PEM), 0o644)


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
    kept unless ``overwrite``. A CA replaced (``overwrite``) has every agent pair it signed
    in the folder (``<id>.crt`` beside ``<id>.key``) issued again with the new one, so no
    certificate there is left signed by a CA that is gone (``--force`` for one agent left the
    others' certificates unverifiable, #29). Processes initialising one folder at once
    take turns (an ``flock`` of the folder), and every file is written whole (a
    temporary file renamed over it): the folder never holds a certificate that its
    ``ca.crt`` did not sign.

    Args:
        out_dir: the certs folder (created).
        agents: agent ids (see :data:`AGENT_ID_RE`).
        team: team name written into the certificates.
        days: validity in days.
        overwrite: replace existing agent certificates (and the CA when it is new).

    Returns:
        The certs folder.

    Raises:
        TeamManifestError (a ValueError): ``agents`` is no list of valid agent ids,
            ``days`` is no int in ``1..MAX_CERT_DAYS``, ``out_dir`` names no folder
            (None, a NUL byte, a lone surrogate, bytes that are not UTF-8: ``icore
            certs --dir`` refuses it too) or is a file (field named).
        ValueError: an existing CA that does not load
            (including a ``ca.key``/``ca.crt`` that is not a regular file, such as a
            FIFO: refused by kind without opening it).
    """
    if isinstance(agents, str | bytes) or not isinstance(agents, Iterable):
        raise TeamManifestError(f"agents must be a list of agent ids, not "
                                f"{type(agents).__name__}", field="agents")
    try:
        for a in agents:
            check_agent_id(a)
        check_days(days)
    except TeamManifestError as exc:  # named once: the argument, not the id check's own
        raise TeamManifestError(exc.message, field="agents") from None
    except ValueError as exc:
        raise TeamManifestError(str(exc), field="days" if "days" in str(exc) else
                                "agents") from None
    if (bad := written_path_problem(out_dir)) is not None:
        raise TeamManifestError(f"the certs folder {bad}", field="out_dir")
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise TeamManifestError(f"the certs folder {out} is a file, not a folder",
                                field="out_dir")
    out.mkdir(parents=True, exist_ok=True)
    with folder_turn(out):
        _init_locked(out, list(agents), team, days, overwrite)
    return out


def _init_locked(out: Path, agents: list[str], team: str, days: int,
                 overwrite: bool) -> None:
    """:func:`init_team_certs` in the folder, its lock held."""
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
        # the pairs the CA this one replaces signed are issued again with the new one
        agents += [a for a in _signed_pairs(out, ca_crt) if a not in agents]
        ca_key, ca_cert = _make_ca(team, days)
        overwrite = True
        _write_key(ca_keyp, ca_key)
        _write_cert(ca_crt, ca_cert)
    for a in agents:
        crt, keyp = out / f"{a}.crt", out / f"{a}.key"
        if crt.exists() and keyp.exists() and not overwrite:
            continue
        key, cert = _make_agent(a, team, ca_key, ca_cert, days)
        _write_key(keyp, key)
        _write_cert(crt, cert)


def _signed_pairs(out: Path, ca_crt: Path) -> list[str]:
    """The agent ids of the pairs in ``out`` that the CA in ``ca_crt`` signed, sorted.

    A pair is ``<id>.crt`` and ``<id>.key``, both regular files; any other file, a
    certificate that does not load or that another CA signed, is left alone (not ours
    to replace). No loadable CA: none.
    """
    try:
        if not_a_regular_file(ca_crt) is not None:
            return []
        old_ca = x509.load_pem_x509_certificate(ca_crt.read_bytes())
    except (OSError, ValueError):
        return []
    found = []
    for crt in sorted(out.glob("*.crt")):
        a = crt.stem
        if a.casefold() == RESERVED_AGENT_ID or AGENT_ID_RE.fullmatch(a) is None or \
                any(not_a_regular_file(out / f"{a}{ext}") is not None
                    for ext in (".crt", ".key")):
            continue
        try:
            x509.load_pem_x509_certificate(crt.read_bytes()).verify_directly_issued_by(old_ca)
        except (OSError, ValueError, TypeError, InvalidSignature):
            continue
        found.append(a)
    return found


__all__ = [
    "AGENT_ID_RE",
    "check_agent_id",
    "check_days",
    "client_context",
    "identity_of_cert",
    "init_team_certs",
    "server_context",
    "x509_name",
]
