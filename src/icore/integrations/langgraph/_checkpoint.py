"""A LangGraph checkpointer whose checkpoints are icore records (planfence Sec. 3.1).

:class:`RecordCheckpointSaver` implements ``BaseCheckpointSaver`` (sync and async) over
any :class:`~icore.memory.Store` (``MemoryStore``, ``SQLiteStore``). Every write is a
commit through the store's owner rules, by the saver's owner:

* a checkpoint is one record, key ``<prefix>/ckpt/<thread>/<ns>/<checkpoint_id>``, whose
  parents are the exact parent checkpoint's record and the channel-value records written
  with it: the record lineage is the checkpoint history (a fork from an older checkpoint
  cites that one);
* each changed channel value is a record ``<prefix>/blob/<thread>/<ns>/<channel>/<ver>``
  (channels unchanged since the parent are not rewritten, as LangGraph expects);
* each pending write is a record ``<prefix>/writes/<thread>/<ns>/<id>/<task>/<idx>``
  citing its checkpoint's record;
* ``delete_thread`` commits a tombstone version of each of the thread's keys (the owner
  keeps one chain of versions per key: history is never rewritten).

Values go through the saver's serde (``dumps_typed``) and are stored base64-encoded in
the record's JSON content. The saver passes ``langgraph-checkpoint-conformance``
(tests/integrations/test_langgraph_checkpoint.py).
"""

from __future__ import annotations

import base64
import fnmatch
import os
import secrets
import threading
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    get_checkpoint_id,
    get_checkpoint_metadata,
    writes_sort_key,
)
from langgraph.checkpoint.serde.base import SerializerProtocol

from icore.errors import IntegrationError
from icore.memory import MemoryStore, OwnershipMap, SQLiteStore, Store
from icore.records import MAX_PARENTS, Record, RecordId

_TOMBSTONE = "tombstone"


def _q(part: str) -> str:
    return quote(str(part), safe="")


def _enc(typed: tuple[str, bytes]) -> dict[str, str]:
    return {"t": typed[0], "b": base64.b64encode(typed[1]).decode("ascii")}


def _dec(obj: Mapping[str, Any]) -> tuple[str, bytes]:
    return str(obj["t"]), base64.b64decode(str(obj["b"]))


class RecordCheckpointSaver(BaseCheckpointSaver[str]):
    """LangGraph checkpoints as versioned, owner-checked icore records.

    Args:
        store: the store the records go to (the saver's owner must own ``<prefix>/*``).
        owner: the agent that writes (the store's owner rules check it on every commit).
        prefix: the key prefix of every record the saver writes.
        serde: LangGraph serializer (default: LangGraph's ``JsonPlusSerializer``).

    Raises:
        IntegrationError: the store's ownership map does not give ``owner`` the
            ``<prefix>/...`` keys.

    Example::

        saver = RecordCheckpointSaver.in_memory()
        graph = builder.compile(checkpointer=saver)
    """

    def __init__(self, store: Store, *, owner: str = "graph", prefix: str = "lg",
                 serde: SerializerProtocol | None = None) -> None:
        super().__init__(serde=serde)
        probe = f"{prefix}/ckpt/probe"
        if store.ownership.owner_of(probe) != owner:
            # a pattern among the exact keys (QA qa-new17c #6: OwnershipMap({"lg/*": ...}))
            given = next((k for k in store.ownership.keys()
                          if any(c in k for c in "*?[") and fnmatch.fnmatchcase(probe, k)),
                         None)
            hint = (f": {given!r} is a pattern given as an exact key: "
                    f"OwnershipMap({{}}, {{{given!r}: {owner!r}}})" if given is not None
                    else f" (a pattern: OwnershipMap({{}}, {{'{prefix}/*': {owner!r}}}))")
            raise IntegrationError("the ownership map must give the saver's owner its keys"
                                   + hint, framework="langgraph", key=probe, owner=owner,
                                   mapped_to=store.ownership.owner_of(probe),
                                   fix=f"RecordCheckpointSaver.sqlite(path, owner={owner!r}) "
                                       "builds the store and its map")
        self.store = store
        self.owner = owner
        self.prefix = prefix
        self._lock = threading.RLock()

    @classmethod
    def in_memory(cls, *, owner: str = "graph", prefix: str = "lg") -> RecordCheckpointSaver:
        """A saver over a fresh :class:`~icore.memory.MemoryStore` owning ``<prefix>/*``."""
        om = OwnershipMap(patterns={f"{prefix}/*": owner})
        return cls(MemoryStore(om, owner), owner=owner, prefix=prefix)

    @classmethod
    def sqlite(cls, where: str | os.PathLike[str] | Any, *, owner: str = "graph",
               prefix: str = "lg") -> RecordCheckpointSaver:
        """A saver over a :class:`~icore.memory.SQLiteStore` file (survives a restart).

        Its store's map is ``OwnershipMap({}, {"<prefix>/*": owner})``.

        Args:
            where: the database file (created with its folder), or a workspace made by
                ``Workspace.sqlite(facts, folder)``: then
                ``<folder>/icore-checkpoints.sqlite`` (next to its owners' files and
                ``icore-attempts.sqlite``).
            owner: the store's agent, owning ``<prefix>/*``.
            prefix: the key prefix of the saver's records.

        Raises:
            IntegrationError: ``where`` is a workspace kept in memory (no folder).
            StoreError: the file cannot be opened as a store of ``owner`` (another
                agent's, not an icore store, open in another process).
        """
        record = getattr(where, "folder_record", None)
        if record is not None:
            where = Path(record.folder) / "icore-checkpoints.sqlite"
        elif not isinstance(where, str | os.PathLike):
            raise IntegrationError("RecordCheckpointSaver.sqlite needs a file path or a "
                                   "workspace made by Workspace.sqlite(facts, folder)",
                                   framework="langgraph", got=type(where).__name__,
                                   fix="RecordCheckpointSaver.sqlite('data/checkpoints.sqlite')")
        om = OwnershipMap(patterns={f"{prefix}/*": owner})
        return cls(SQLiteStore(where, om, owner), owner=owner, prefix=prefix)

    # ------------------------------------------------------------------ keys and records
    def _ckpt_key(self, thread: str, ns: str, cid: str) -> str:
        return f"{self.prefix}/ckpt/{_q(thread)}/{_q(ns)}/{_q(cid)}"

    def _blob_key(self, thread: str, ns: str, channel: str, ver: Any) -> str:
        return f"{self.prefix}/blob/{_q(thread)}/{_q(ns)}/{_q(channel)}/{_q(str(ver))}"

    def _writes_prefix(self, thread: str, ns: str, cid: str) -> str:
        return f"{self.prefix}/writes/{_q(thread)}/{_q(ns)}/{_q(cid)}/"

    def _head(self, key: str) -> Record | None:
        h = self.store.head(key)
        if h is None:
            return None
        r = self.store.get(h.record_id)
        if r is None or r.type == _TOMBSTONE:
            return None
        return r

    def _commit(self, key: str, type_: str, content: Any,
                parents: Sequence[RecordId] = ()) -> Record:
        with self._lock:
            prev = self.store.head(key)
            ps = list(dict.fromkeys(parents))
            if prev is not None and prev.record_id not in ps:
                ps.append(prev.record_id)  # the key's previous version: one chain per key
            if len(ps) > MAX_PARENTS:
                raise IntegrationError("a checkpoint cites more records than a record may",
                                       framework="langgraph", key=key, parents=len(ps))
            rec = Record.create(key=key, owner=self.owner, seq=self.store.next_seq(self.owner),
                                type=type_, content=content, parents=ps)
            self.store.commit(rec, writer=self.owner)
            return rec

    def _keys(self, prefix: str) -> list[str]:
        return [k for k in self.store.head_keys() if k.startswith(prefix)]

    # ------------------------------------------------------------------ reading
    def _load_blobs(self, thread: str, ns: str, versions: Mapping[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for ch, ver in versions.items():
            r = self._head(self._blob_key(thread, ns, ch, ver))
            if r is None or not isinstance(r.content, dict) or "value" not in r.content:
                continue
            out[ch] = self.serde.loads_typed(_dec(r.content["value"]))  # type: ignore[arg-type]
        return out

    def _pending(self, thread: str, ns: str, cid: str) -> list[tuple[str, str, Any]]:
        rows: list[tuple[str, int, str, str, Any]] = []
        for key in self._keys(self._writes_prefix(thread, ns, cid)):
            r = self._head(key)
            if r is None or not isinstance(r.content, dict):
                continue
            c = r.content
            rows.append((str(c["task_id"]), int(c["idx"]),  # type: ignore[arg-type]
                         str(c["task_path"]), str(c["channel"]),
                         self.serde.loads_typed(_dec(c["value"]))))  # type: ignore[arg-type]
        rows.sort(key=lambda w: writes_sort_key(w[2], w[0], w[1]))
        return [(t, ch, v) for t, _, _, ch, v in rows]

    def _tuple(self, r: Record) -> CheckpointTuple:
        c = r.content
        assert isinstance(c, dict)
        thread, ns, cid = str(c["thread_id"]), str(c["checkpoint_ns"]), str(c["checkpoint_id"])
        ckpt: Checkpoint = self.serde.loads_typed(_dec(c["checkpoint"]))  # type: ignore[arg-type]
        parent = c.get("parent_checkpoint_id")
        return CheckpointTuple(
            config={"configurable": {"thread_id": thread, "checkpoint_ns": ns,
                                     "checkpoint_id": cid}},
            checkpoint={**ckpt, "channel_values": self._load_blobs(
                thread, ns, ckpt["channel_versions"])},
            metadata=self.serde.loads_typed(_dec(c["metadata"])),  # type: ignore[arg-type]
            parent_config={"configurable": {"thread_id": thread, "checkpoint_ns": ns,
                                            "checkpoint_id": str(parent)}}
            if parent else None,
            pending_writes=self._pending(thread, ns, cid),
        )

    def checkpoint_record(self, config: RunnableConfig) -> Record | None:
        """The icore record of the checkpoint ``config`` names (None when absent)."""
        conf = config["configurable"]
        cid = get_checkpoint_id(config)
        if cid is None:
            return None
        return self._head(self._ckpt_key(str(conf["thread_id"]),
                                         str(conf.get("checkpoint_ns", "")), cid))

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """The checkpoint ``config`` names, or the thread's latest one."""
        conf = config["configurable"]
        thread, ns = str(conf["thread_id"]), str(conf.get("checkpoint_ns", ""))
        cid = get_checkpoint_id(config)
        if cid:
            r = self._head(self._ckpt_key(thread, ns, cid))
            return self._tuple(r) if r is not None else None
        base = f"{self.prefix}/ckpt/{_q(thread)}/{_q(ns)}/"
        recs = [r for k in self._keys(base) if (r := self._head(k)) is not None]
        if not recs:
            return None
        latest = max(recs, key=lambda r: str(r.content["checkpoint_id"]))  # type: ignore[index]
        return self._tuple(latest)

    def list(self, config: RunnableConfig | None, *, filter: dict[str, Any] | None = None,
             before: RunnableConfig | None = None, limit: int | None = None
             ) -> Iterator[CheckpointTuple]:
        """Checkpoints, newest first, by thread / namespace / metadata / ``before``."""
        base = f"{self.prefix}/ckpt/"
        ns_want: str | None = None
        cid_want: str | None = None
        if config is not None:
            conf = config["configurable"]
            base += f"{_q(str(conf['thread_id']))}/"
            ns_want = conf.get("checkpoint_ns")
            cid_want = get_checkpoint_id(config)
        before_id = get_checkpoint_id(before) if before else None
        recs = [r for k in self._keys(base) if (r := self._head(k)) is not None]
        recs.sort(key=lambda r: (str(r.content["thread_id"]),  # type: ignore[index]
                                 str(r.content["checkpoint_ns"]),  # type: ignore[index]
                                 str(r.content["checkpoint_id"])),  # type: ignore[index]
                  reverse=True)
        n = 0
        for r in recs:
            c = r.content
            assert isinstance(c, dict)
            if ns_want is not None and c["checkpoint_ns"] != ns_want:
                continue
            if cid_want and c["checkpoint_id"] != cid_want:
                continue
            if before_id and str(c["checkpoint_id"]) >= before_id:
                continue
            if filter:
                meta = self.serde.loads_typed(_dec(c["metadata"]))  # type: ignore[arg-type]
                if not all(meta.get(k) == v for k, v in filter.items()):
                    continue
            if limit is not None and n >= limit:
                return
            n += 1
            yield self._tuple(r)

    # ------------------------------------------------------------------ writing
    def put(self, config: RunnableConfig, checkpoint: Checkpoint, metadata: CheckpointMetadata,
            new_versions: ChannelVersions) -> RunnableConfig:
        """Commit the checkpoint (citing its exact parent) and its changed channels."""
        conf = config["configurable"]
        thread, ns = str(conf["thread_id"]), str(conf.get("checkpoint_ns", ""))
        parent_id = conf.get("checkpoint_id")
        c: dict[str, Any] = dict(checkpoint)
        values: dict[str, Any] = c.pop("channel_values", None) or {}
        with self._lock:
            parents: list[RecordId] = []
            if parent_id:
                pr = self._head(self._ckpt_key(thread, ns, str(parent_id)))
                if pr is not None:
                    parents.append(pr.id)
            for ch, ver in new_versions.items():
                content = ({"channel": ch, "value": _enc(self.serde.dumps_typed(values[ch]))}
                           if ch in values else {"channel": ch, "empty": True})
                blob = self._commit(self._blob_key(thread, ns, ch, ver), "lg_blob", content)
                parents.append(blob.id)
            meta = get_checkpoint_metadata(config, metadata)
            self._commit(self._ckpt_key(thread, ns, checkpoint["id"]), "lg_checkpoint", {
                "thread_id": thread, "checkpoint_ns": ns, "checkpoint_id": checkpoint["id"],
                "parent_checkpoint_id": str(parent_id) if parent_id else None,
                "checkpoint": _enc(self.serde.dumps_typed(c)),
                "metadata": _enc(self.serde.dumps_typed(meta)),
            }, parents)
        return {"configurable": {"thread_id": thread, "checkpoint_ns": ns,
                                 "checkpoint_id": checkpoint["id"]}}

    def put_writes(self, config: RunnableConfig, writes: Sequence[tuple[str, Any]],
                   task_id: str, task_path: str = "") -> None:
        """Commit pending writes (each citing its checkpoint's record)."""
        conf = config["configurable"]
        thread, ns = str(conf["thread_id"]), str(conf.get("checkpoint_ns", ""))
        cid = str(conf["checkpoint_id"])
        with self._lock:
            ck = self._head(self._ckpt_key(thread, ns, cid))
            parents = [ck.id] if ck is not None else []
            for i, (ch, value) in enumerate(writes):
                idx = WRITES_IDX_MAP.get(ch, i)
                key = f"{self._writes_prefix(thread, ns, cid)}{_q(task_id)}/{idx}"
                if idx >= 0 and self._head(key) is not None:
                    continue  # a regular write is stored once (idempotent retries)
                self._commit(key, "lg_write", {
                    "task_id": task_id, "task_path": task_path, "channel": ch, "idx": idx,
                    "value": _enc(self.serde.dumps_typed(value))}, parents)

    def delete_thread(self, thread_id: str) -> None:
        """Tombstone every record of ``thread_id`` (checkpoints, channel values, writes)."""
        t = _q(str(thread_id))
        with self._lock:
            for kind in ("ckpt", "blob", "writes"):
                for key in self._keys(f"{self.prefix}/{kind}/{t}/"):
                    if self._head(key) is not None:
                        self._commit(key, _TOMBSTONE, {"deleted": True})

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Copy a thread: each record gets a twin under the target thread.

        The twin cites the source record (provenance) and the twins of its parents, so
        the exact parent chain, channel values and pending writes are all copied.
        """
        src, dst = _q(str(source_thread_id)), _q(str(target_thread_id))
        twin: dict[RecordId, RecordId] = {}
        with self._lock:
            for kind in ("blob", "ckpt", "writes"):
                recs = [r for k in self._keys(f"{self.prefix}/{kind}/{src}/")
                        if (r := self._head(k)) is not None]
                if kind == "ckpt":  # parents before children
                    recs.sort(key=lambda r: str(r.content["checkpoint_id"]))  # type: ignore[index]
                for r in recs:
                    content = r.content
                    if kind == "ckpt" and isinstance(content, dict):
                        content = {**content, "thread_id": str(target_thread_id)}
                    new_key = r.key.replace(f"/{kind}/{src}/", f"/{kind}/{dst}/", 1)
                    parents = [twin[p] for p in r.parents if p in twin] + [r.id]
                    twin[r.id] = self._commit(new_key, r.type, content, parents).id

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Tombstone the checkpoints whose metadata names one of ``run_ids``.

        Their pending writes go too; channel values stay (later checkpoints may share
        them).
        """
        runs = {str(r) for r in run_ids}
        with self._lock:
            for key in self._keys(f"{self.prefix}/ckpt/"):
                r = self._head(key)
                if r is None or not isinstance(r.content, dict):
                    continue
                meta = self.serde.loads_typed(_dec(r.content["metadata"]))  # type: ignore[arg-type]
                if str(meta.get("run_id")) not in runs:
                    continue
                c = r.content
                wp = self._writes_prefix(str(c["thread_id"]), str(c["checkpoint_ns"]),
                                         str(c["checkpoint_id"]))
                for wk in self._keys(wp):
                    if self._head(wk) is not None:
                        self._commit(wk, _TOMBSTONE, {"deleted": True})
                self._commit(key, _TOMBSTONE, {"deleted": True})

    def get_next_version(self, current: str | None, channel: None) -> str:
        """Monotone, sortable channel versions (``<n:032>.<digest>``)."""
        if current is None:
            n = 0
        elif isinstance(current, int):
            n = current
        else:
            n = int(str(current).split(".")[0])
        return f"{n + 1:032}.{secrets.randbelow(10**16):016}"

    # ------------------------------------------------------------------ async
    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """Async :meth:`get_tuple` (the store calls are in-process)."""
        return self.get_tuple(config)

    async def alist(self, config: RunnableConfig | None, *,
                    filter: dict[str, Any] | None = None, before: RunnableConfig | None = None,
                    limit: int | None = None) -> AsyncIterator[CheckpointTuple]:
        """Async :meth:`list`."""
        for t in self.list(config, filter=filter, before=before, limit=limit):
            yield t

    async def aput(self, config: RunnableConfig, checkpoint: Checkpoint,
                   metadata: CheckpointMetadata, new_versions: ChannelVersions
                   ) -> RunnableConfig:
        """Async :meth:`put`."""
        return self.put(config, checkpoint, metadata, new_versions)

    async def aput_writes(self, config: RunnableConfig, writes: Sequence[tuple[str, Any]],
                          task_id: str, task_path: str = "") -> None:
        """Async :meth:`put_writes`."""
        self.put_writes(config, writes, task_id, task_path)

    async def adelete_thread(self, thread_id: str) -> None:
        """Async :meth:`delete_thread`."""
        self.delete_thread(thread_id)

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Async :meth:`copy_thread`."""
        self.copy_thread(source_thread_id, target_thread_id)

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Async :meth:`delete_for_runs`."""
        self.delete_for_runs(run_ids)
