"""The chain check of the store conformance suite (see :func:`check_chains`)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from icore.memory._base import Store
from icore.records import Record, RecordId


def check_chains(store: Store, acked: Iterable[RecordId],
                 replaced: Mapping[RecordId, RecordId | None] | None = None) -> list[str]:
    """Check the one-chain invariant of concurrent writers (planfence App. A).

    For each key, the acknowledged versions must form one chain: walking back from the
    key's head through each version's predecessor - the head it replaced: its parent
    that is a version of the same key, or the expected head it was committed with -
    visits every acknowledged version of the key exactly once, with owner sequences
    strictly decreasing, and every acknowledged version is readable.

    Args:
        store: the store (e.g. reopened after a restart).
        acked: ids of every version the store acknowledged as created.
        replaced: for versions committed with an explicit ``expected_head``: id -> that
            head (None for a creation).

    Returns:
        Problems found (empty when the invariant holds).
    """
    problems: list[str] = []
    by_key: dict[str, set[RecordId]] = {}
    for rid in acked:
        rec = store.get(rid)
        if rec is None:
            problems.append(f"acknowledged {rid[:12]} is not readable")
            continue
        by_key.setdefault(rec.key, set()).add(rid)
    for key, ids in sorted(by_key.items()):
        head = store.head(key)
        chain: list[Record] = []
        cur: RecordId | None = None if head is None else head.record_id
        while cur is not None:
            rec = store.get(cur)
            if rec is None:
                problems.append(f"{key}: chain record {cur[:12]} is not readable")
                break
            if chain and rec.seq >= chain[-1].seq:
                problems.append(f"{key}: sequence does not increase along the chain "
                                f"({rec.seq} then {chain[-1].seq})")
            chain.append(rec)
            if replaced is not None and rec.id in replaced:
                cur = replaced[rec.id]
                continue
            if rec.supersedes is not None:
                cur = rec.supersedes
                continue
            same = [p for p in rec.parents if (q := store.get(p)) is not None and q.key == key]
            if len(same) > 1:
                problems.append(f"{key}: {rec.id[:12]} cites {len(same)} versions of its key")
            cur = same[0] if same else None
        on_chain = {r.id for r in chain}
        if ids - on_chain:
            problems.append(f"{key}: {len(ids - on_chain)} acknowledged versions are not on "
                            "the key's chain (a lost update)")
        if len(on_chain) != len(chain):
            problems.append(f"{key}: the chain repeats a version")
    return problems
