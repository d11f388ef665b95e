"""Owner head digests in the heads bucket (#27): one entry per owner, all its heads.

An owner's digest is the heads-bucket key ``<owner>`` (subject ``$KV.<heads>.<owner>``,
inside the owner's own write permissions; no watcher of ``<owner>.>`` sees it). Its value
is msgpack ``[DIGEST_VERSION, {semantic key: [record id as 32 bytes, seq]}]``, or
``[DIGEST_VERSION, None]`` once the owner has more than :data:`DIGEST_MAX_KEYS` keys
(readers then use the per-key heads). Writers add a commit's head to the digest before
acknowledging it (:meth:`icore.memory.nats.NatsMemory.roll_forward`), so the digest holds
every acknowledged head, and the gate reads the d heads of an owner as one message
(planfence Alg. 1 lines 5-6) instead of one message per key (~200 bytes of direct-get
headers each).

Owner entries written by digest-aware writers carry :data:`INTENT_LAYOUT` as a fifth
element: a writer from before digests cannot parse them and refuses to commit
(``StoreError``), so no writer that ignores the digest can acknowledge a head after the
owner's digest exists. Pure codec: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping

import msgpack

from icore.errors import StoreError
from icore.memory import HeadEntry

DIGEST_VERSION = 1
"""Layout version of a digest value; another version fails the read (fail closed)."""
DIGEST_MAX_KEYS = 256
"""An owner with more keys keeps an overflow marker instead (a digest stays <= ~12 KB)."""
INTENT_LAYOUT = 1
"""Fifth element of owner entries written by digest-aware writers."""
PER_KEY_DIGEST_RATIO = 6
"""The gate reads the digest when the owner's digest has at most this many keys per
queried key (a digest entry is ~45 bytes, a per-key head message ~300)."""


def encode_digest(heads: Mapping[str, HeadEntry] | None) -> bytes:
    """Encode an owner's heads (``None``: the overflow marker) as a digest value.

    Args:
        heads: semantic key -> head, every record id 64 lowercase hex.

    Returns:
        msgpack ``[DIGEST_VERSION, {key: [32-byte id, seq]}]`` (keys sorted), or
        ``[DIGEST_VERSION, None]``.
    """
    if heads is None:
        body: dict[str, list[object]] | None = None
    else:
        body = {k: [bytes.fromhex(heads[k].record_id), heads[k].seq] for k in sorted(heads)}
    return msgpack.packb([DIGEST_VERSION, body], use_bin_type=True)  # type: ignore[no-any-return]


def decode_digest(owner: str, data: bytes) -> dict[str, HeadEntry] | None:
    """Inverse of :func:`encode_digest`.

    Returns:
        semantic key -> :class:`HeadEntry`, or None for the overflow marker.

    Raises:
        StoreError: the value does not parse, has another layout version (written by a
            newer icore) or holds a malformed entry.
    """
    try:
        got = msgpack.unpackb(data, raw=False)
    except Exception as exc:
        raise StoreError("malformed head digest in the engine", owner=owner) from exc
    if not (isinstance(got, list) and len(got) == 2):
        raise StoreError("malformed head digest in the engine", owner=owner)
    version, body = got
    if version != DIGEST_VERSION or isinstance(version, bool):
        raise StoreError("head digest of another layout version (a newer icore wrote it)",
                         owner=owner, version=str(version)[:20], supported=DIGEST_VERSION)
    if body is None:
        return None
    if not isinstance(body, dict):
        raise StoreError("malformed head digest in the engine", owner=owner)
    out: dict[str, HeadEntry] = {}
    for k, v in body.items():
        if not (isinstance(k, str) and isinstance(v, list) and len(v) == 2
                and isinstance(v[0], bytes) and len(v[0]) == 32
                and isinstance(v[1], int) and not isinstance(v[1], bool) and v[1] >= 0):
            raise StoreError("malformed head digest entry in the engine", owner=owner,
                             key=str(k)[:200])
        out[k] = HeadEntry(k, v[0].hex(), v[1])
    return out


def with_head(heads: Mapping[str, HeadEntry] | None, head: HeadEntry
              ) -> dict[str, HeadEntry] | None:
    """The digest after ``head`` moved forward (never backwards); None stays overflowed.

    Returns:
        A new mapping (or None once more than :data:`DIGEST_MAX_KEYS` keys).
    """
    if heads is None:
        return None
    cur = heads.get(head.key)
    if cur is not None and cur.seq >= head.seq:
        out = dict(heads)
    else:
        out = {**heads, head.key: HeadEntry(head.key, head.record_id, head.seq)}
    return None if len(out) > DIGEST_MAX_KEYS else out


def use_digest(d: int, digest_keys: int | None) -> bool:
    """Whether a gate query of ``d`` distinct keys reads the owner's digest.

    Args:
        d: distinct keys queried.
        digest_keys: the owner's digest size seen last (None: not read yet; -1: the owner
            has no digest or it overflowed).

    Returns:
        True for d >= 2 when the digest is not known to be larger than
        :data:`PER_KEY_DIGEST_RATIO` entries per queried key.
    """
    if d < 2:
        return False
    if digest_keys is None:
        return True
    return 0 <= digest_keys <= PER_KEY_DIGEST_RATIO * d
