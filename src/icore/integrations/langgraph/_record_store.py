"""A LangGraph ``BaseStore`` over icore owner memory (planfence Sec. 3.1).

Graph nodes keep using the store API they know (``store.put(ns, key, value)``,
``store.get``, ``store.search``, ``store.list_namespaces``) and get versioned,
owner-checked records: item ``(namespace, key)`` is the icore key
``<prefix>/<ns_1>/.../<ns_n>/<key>`` (each part percent-encoded), every put is a new version
citing the previous one, a delete is a tombstone version, and a put by an agent that
does not own the key is refused by the owner rules
(:class:`~icore.errors.OwnershipError` naming the key and its owner). ``get`` sees the
agent's own heads and the records replicated into its store (``installed_head``);
``search`` and ``list_namespaces`` cover the agent's own keys.
Semantic search (``index``) and TTLs are not supported; ``query`` is refused.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote, unquote

from langgraph.store.base import (
    BaseStore,
    GetOp,
    Item,
    ListNamespacesOp,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
)

from icore.errors import IntegrationError
from icore.memory import Store
from icore.records import Record, RecordId

_TOMBSTONE = "tombstone"


def _match(value: Any, want: Any) -> bool:
    if isinstance(want, Mapping) and want and all(str(k).startswith("$") for k in want):
        ops = {"$eq": lambda a, b: a == b, "$ne": lambda a, b: a != b,
               "$gt": lambda a, b: a > b, "$gte": lambda a, b: a >= b,
               "$lt": lambda a, b: a < b, "$lte": lambda a, b: a <= b}
        try:
            return all(ops[str(k)](value, v) for k, v in want.items())
        except KeyError as exc:
            raise IntegrationError("unsupported filter operator", framework="langgraph",
                                   operator=str(exc)) from None
        except TypeError:
            return False
    if isinstance(want, Mapping):
        return isinstance(value, Mapping) and all(_match(value.get(k), v)
                                                  for k, v in want.items())
    return bool(value == want)


class RecordStore(BaseStore):
    """``BaseStore`` whose items are versioned icore records written by ``agent``.

    Args:
        store: the agent's icore store (its own keys plus installed replicas).
        agent: the writer (the owner rules check it on every put).
        prefix: the icore key prefix of the items.

    Raises:
        IntegrationError: ``prefix`` is empty or contains ``/`` at its ends.
    """

    supports_ttl = False

    def __init__(self, store: Store, *, agent: str, prefix: str = "store") -> None:
        if not prefix or prefix.strip("/") != prefix:
            raise IntegrationError("prefix must be non-empty without leading/trailing '/'",
                                   framework="langgraph", prefix=prefix)
        self.store = store
        self.agent = agent
        self.prefix = prefix
        self._lock = threading.Lock()

    def key_of(self, namespace: tuple[str, ...], key: str) -> str:
        """The icore key of item ``(namespace, key)``."""
        return "/".join([self.prefix, *(quote(p, safe="") for p in (*namespace, key))])

    def _split(self, ikey: str) -> tuple[tuple[str, ...], str] | None:
        head = self.prefix + "/"
        if not ikey.startswith(head):
            return None
        parts = [unquote(p) for p in ikey[len(head):].split("/")]
        if len(parts) < 2:
            return None
        return tuple(parts[:-1]), parts[-1]

    def _record(self, ikey: str) -> Record | None:
        h = self.store.installed_head(ikey)
        if h is None:
            return None
        r = self.store.get(h.record_id)
        if r is None or not r.has_content or r.type == _TOMBSTONE:
            return None
        return r

    def _item(self, r: Record, namespace: tuple[str, ...], key: str) -> Item:
        c = r.content
        assert isinstance(c, dict)
        return Item(value=dict(c["value"]), key=key, namespace=namespace,  # type: ignore[arg-type]
                    created_at=datetime.fromisoformat(str(c["created_at"])),
                    updated_at=datetime.fromisoformat(str(c["updated_at"])))

    def record_of(self, namespace: tuple[str, ...], key: str) -> Record | None:
        """The current icore record of an item (None when absent or deleted)."""
        return self._record(self.key_of(namespace, key))

    def history(self, namespace: tuple[str, ...], key: str) -> list[Record]:
        """Every version of an item, newest first (tombstones included)."""
        ikey = self.key_of(namespace, key)
        h = self.store.installed_head(ikey)
        out: list[Record] = []
        rid: RecordId | None = h.record_id if h is not None else None
        while rid is not None:
            r = self.store.get(rid)
            if r is None:
                break
            out.append(r)
            rid = next((p for p in r.parents
                        if (q := self.store.get(p)) is not None and q.key == ikey), None)
        return out

    def _put(self, op: PutOp) -> None:
        ikey = self.key_of(op.namespace, op.key)
        with self._lock:
            prev = self.store.installed_head(ikey)
            prev_rec = self.store.get(prev.record_id) if prev is not None else None
            parents = [prev.record_id] if prev is not None else []
            if op.value is None:
                if prev_rec is None or prev_rec.type == _TOMBSTONE:
                    return
                content: Any = {"deleted": True}
                type_ = _TOMBSTONE
            else:
                now = datetime.now(UTC).isoformat()
                created = now
                if prev_rec is not None and prev_rec.type != _TOMBSTONE and isinstance(
                        prev_rec.content, dict):
                    created = str(prev_rec.content.get("created_at", now))
                content = {"value": dict(op.value), "created_at": created, "updated_at": now}
                type_ = "lg_item"
            rec = Record.create(key=ikey, owner=self.agent, seq=self.store.next_seq(self.agent),
                                type=type_, content=content, parents=parents)
            self.store.commit(rec, writer=self.agent)

    def _keys(self) -> list[str]:
        return sorted(k for k in self.store.head_keys() if k.startswith(self.prefix + "/"))

    def _search(self, op: SearchOp) -> list[SearchItem]:
        if op.query:
            raise IntegrationError("semantic search is not supported by RecordStore",
                                   framework="langgraph", query=op.query)
        out: list[SearchItem] = []
        for ikey in self._keys():
            nk = self._split(ikey)
            if nk is None or nk[0][:len(op.namespace_prefix)] != op.namespace_prefix:
                continue
            r = self._record(ikey)
            if r is None:
                continue
            it = self._item(r, *nk)
            if op.filter and not all(_match(it.value.get(k), v) for k, v in op.filter.items()):
                continue
            out.append(SearchItem(namespace=it.namespace, key=it.key, value=it.value,
                                  created_at=it.created_at, updated_at=it.updated_at))
        out.sort(key=lambda i: i.updated_at, reverse=True)
        return out[op.offset:op.offset + op.limit]

    def _namespaces(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        found: set[tuple[str, ...]] = set()
        for ikey in self._keys():
            nk = self._split(ikey)
            if nk is None or self._record(ikey) is None:
                continue
            ns = nk[0]
            ok = True
            for cond in op.match_conditions or ():
                path = tuple(cond.path)
                part = ns[:len(path)] if cond.match_type == "prefix" else ns[-len(path):]
                if len(ns) < len(path) or not all(p in ("*", n) for n, p in zip(part, path,
                                                                            strict=True)):
                    ok = False
            if ok:
                found.add(ns[:op.max_depth] if op.max_depth is not None else ns)
        return sorted(found)[op.offset:op.offset + op.limit]

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run store operations in order (LangGraph's one entry point)."""
        results: list[Result] = []
        for op in ops:
            if isinstance(op, GetOp):
                r = self.record_of(op.namespace, op.key)
                results.append(self._item(r, op.namespace, op.key) if r is not None else None)
            elif isinstance(op, PutOp):
                self._put(op)
                results.append(None)
            elif isinstance(op, SearchOp):
                results.append(self._search(op))
            elif isinstance(op, ListNamespacesOp):
                results.append(self._namespaces(op))
            else:
                raise IntegrationError("unknown store operation", framework="langgraph",
                                       op=type(op).__name__)
        return results

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """Async :meth:`batch` (in-process store calls)."""
        return self.batch(ops)
