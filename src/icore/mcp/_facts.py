"""Shared facts as versioned records, each session's reads, and the gate (the gateway's seam).

The one module of the gateway that touches the team API (:mod:`icore.workspace`, issue
28), so the rest of the gateway speaks MCP only:

* a fact is a semantic key (an upstream resource URI, or a ``fact://`` key of the
  gateway's own key-value set) with an owner (planfence Sec. 3.1); its versions are
  records in the owner's store, each citing the version it replaces; the owner's head is
  the current version;
* :meth:`FactBook.observe` turns content the gateway just read (a session's
  ``resources/read``, a re-read after ``notifications/resources/updated`` or after a
  tool that writes it, a ``fact://`` write) into a new version when it differs from the
  head (compare-and-set on the head, App. A);
* each client session is a workspace :class:`~icore.workspace.Agent`: its reads are the
  versions it saw; :meth:`FactBook.execute` runs a protected call through the agent
  (the action record derived from those versions and bound to the arguments, planfence
  Alg. 1 against the owners' heads, the one replan by hand-over).
"""

from __future__ import annotations

import json
from collections.abc import (
    Awaitable,
    Callable,
    Collection,
    Hashable,
    Iterable,
    Mapping,
    Sequence,
)
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from icore.errors import CommitConflict, IcoreError
from icore.fence import GateDecision, GateValidator, Reason
from icore.memory import (
    DEFAULT_TIMEOUT_S,
    HeadReply,
    MemoryStore,
    OwnerAccess,
    OwnershipMap,
    Store,
)
from icore.records import JSONValue, Record, RecordId, canonical_json
from icore.workspace import (
    NOT_READ,
    Agent,
    Call,
    Workspace,
    WorkspaceError,
)
from icore.workspace import bad_args_hint as _bad_args_hint

_WRITE_RETRIES = 8


@dataclass(frozen=True, slots=True)
class _Unanswered:
    """A forwarded call whose effect is open to the agent: its reads are spent.

    The workspace (:func:`icore.workspace._unknown.failure_of`) reads ``may_have_run``
    and ``error``. ``value``: what the forward returned (a result the client never
    received), None when it raised.
    """

    error: str
    value: Any = None
    may_have_run: bool = True


@dataclass
class SessionView:
    """One client session: its id in the trace and its workspace agent.

    Attributes:
        sid: the session's id (``<client name>#<n>``), also the agent's name.
        agent: the :class:`~icore.workspace.Agent` whose reads are this session's.
    """

    sid: str
    agent: Agent

    @property
    def seen(self) -> dict[str, Record]:
        """Key -> the version this session last saw."""
        return self.agent.seen()


@dataclass(frozen=True, slots=True)
class Verdict:
    """What one protected call did.

    Attributes:
        call: the workspace's :class:`~icore.workspace.Call` (``executed``, ``value``,
            ``reason``, ``record``: the action record, the call's root).
        decisions: the gate decisions made for it (none when refused before the gate:
            ``not_read``, ``args_not_json``, ``incomplete_declaration``).
        deps: D(a) with the call's arguments filled in.
        changed: key -> the current record of each fact whose version the session had
            not seen (handed over with a ``stale`` / ``not_read`` refusal, or changed
            again after a ``second_change``).
        stale: of a ``not_read`` refusal, the keys the session had read whose version
            was no longer the owner's head (their fresh versions are in ``changed``,
            handed over with the same refusal).
    """

    call: Call
    decisions: tuple[GateDecision, ...]
    deps: tuple[str, ...]
    changed: Mapping[str, Record] = field(default_factory=dict)
    stale: tuple[str, ...] = ()

    @property
    def reason(self) -> str:
        """The call's reason code (``valid``, ``stale``, ``not_read``, ...)."""
        return self.call.reason


def bad_args_hint(bad: Mapping[str, Any], tool: str = "the tool") -> str:
    """Why a call is refused whose :func:`glob_args` are ``bad`` (QA r8-ag2mcp D5).

    The workspace's text (:func:`icore.workspace.bad_args_hint`).
    """
    return _bad_args_hint({k: str(v) for k, v in bad.items()}, tool)


def text_of(content: JSONValue, limit: int = 2000) -> str:
    """A fact's value as text for a model (resource text parts, or the fact's JSON)."""
    if isinstance(content, dict) and isinstance(content.get("contents"), list):
        texts = []
        for part in content["contents"]:
            if isinstance(part, dict) and isinstance(part.get("text"), str):
                texts.append(part["text"])
            elif isinstance(part, dict) and "blob" in part:
                texts.append(f"<binary {part.get('mimeType') or ''}>")
        s = "\n".join(texts)
    else:
        s = json.dumps(content, sort_keys=True, default=str, ensure_ascii=False)
    return s if len(s) <= limit else s[:limit] + "...[cut]"


def describe(rec: Record, version: int | None = None) -> str:
    """One fact version for a model: ``key = value (version n)``.

    ``version``: the key's own version number (:meth:`FactBook.version_of`); None: the
    owner's record sequence is shown instead (``owner seq n``, over all its keys).
    """
    if version is not None:
        return f"{rec.key} = {text_of(rec.content)} (version {version})"
    return f"{rec.key} = {text_of(rec.content)} (owner seq {rec.seq})"


class InlineOwners:
    """:class:`~icore.memory.AsyncOwnerAccess` over owners whose stores are in this process.

    They answer from memory or a local SQLite file, so the gate awaits them inline: a
    worker thread per owner would cost more than the read. Any exception (an owner down,
    a closed store) reaches the gate, which blocks (fail closed). An answer never waits
    on the event loop, so a gate timer (``asyncio.timeout`` per owner) could not end it
    early and is not armed (``bounds_timeouts``), and the owners are asked one after
    another, with no task per owner (``answers_inline``).
    """

    bounds_timeouts = True
    answers_inline = True

    def __init__(self, owners: OwnerAccess) -> None:
        self.owners = owners

    async def query_heads(self, owner: str, keys: Sequence[str], *,
                          known: Mapping[str, RecordId] | None = None,
                          timeout_s: float = DEFAULT_TIMEOUT_S) -> HeadReply:
        """See :meth:`icore.memory.AsyncOwnerAccess.query_heads`."""
        return self.owners.query_heads(owner, keys, known=known, timeout_s=timeout_s)

    async def fetch(self, owner: str, ids: Sequence[RecordId], *,
                    timeout_s: float = DEFAULT_TIMEOUT_S) -> list[Record]:
        """See :meth:`icore.memory.AsyncOwnerAccess.fetch`."""
        return self.owners.fetch(owner, ids, timeout_s=timeout_s)


class FactBook:
    """The gateway's workspace: owners' stores and heads, one agent per client session.

    Args:
        owners: key (or glob) -> owner id.
        backend: ``"memory"``, ``"sqlite"`` (one file per owner under ``path``) or
            ``"nats"``.
        path: folder of the SQLite files, for ``"sqlite"``.
        gate_timeout_s: bound of one owner query of the gate, seconds.
        remote: owner -> ``(host, port)`` of owners serving their own stores (the owner
            service over TCP with mutual TLS); the other owners are in process.
        identity: the gateway's agent id in the team (with ``remote`` or ``serve``).
        certs_dir: the team's certificate folder (``remote``, ``serve``, ``"nats"``).
        serve: owner -> ``(host, port)``: owners hosted here whose stores
            :meth:`start_serving` serves to other processes (the owner service).
        servers: NATS URLs, for ``backend="nats"`` (every owner's store on JetStream).
        prefix: the team's NATS bucket prefix (default ``icore``).

    Raises:
        WorkspaceError: ``owners`` has an empty key or owner, or the owner service is
            asked for without identity and certs_dir.
        OwnerUnreachable: the NATS engine did not answer (``"nats"``).
    """

    def __init__(self, owners: Mapping[str, str], *, backend: str = "memory",
                 path: Path | None = None, gate_timeout_s: float = DEFAULT_TIMEOUT_S,
                 remote: Mapping[str, tuple[str, int]] | None = None,
                 identity: str | None = None, certs_dir: Path | None = None,
                 serve: Mapping[str, tuple[str, int]] | None = None,
                 servers: Sequence[str] = (), prefix: str | None = None) -> None:
        facts = dict(owners) or {"fact://icore/none": "icore"}
        self.remote = dict(remote or {})
        self._versions: dict[RecordId, int] = {}
        """Record id -> its number among its key's versions (:meth:`version_of`)."""
        self.serving = dict(serve or {})
        self.certs_dir = certs_dir
        self.ports: dict[str, int] = {}
        """Owner -> the port its store is served on (after :meth:`start_serving`)."""
        self._servers: list[Any] = []
        self._gate_owners: Any = None
        if self.remote or self.serving:
            if identity is None or certs_dir is None:
                raise WorkspaceError("the owner service needs the gateway's identity and "
                                     "the team's certs_dir")
            om = OwnershipMap.from_mapping(facts)
            unknown = sorted(set(self.serving) - om.owners())
            if unknown:
                raise WorkspaceError("serve names owners of no fact", owners=unknown)
            local = {o: MemoryStore(om, o) for o in sorted(om.owners() - set(self.remote))}
            if self.remote:
                self.ws = Workspace.over_tcp(om, identity=identity, addresses=self.remote,
                                             certs_dir=certs_dir, stores=local,
                                             timeout_s=gate_timeout_s)
            else:
                self.ws = Workspace(om, stores=local, timeout_s=gate_timeout_s)
        elif backend == "nats" and owners:
            self.ws = self._nats(facts, servers, certs_dir, prefix, gate_timeout_s)
        elif backend == "sqlite":
            assert path is not None
            path.mkdir(parents=True, exist_ok=True)
            self.ws = Workspace.sqlite(facts, path)
        else:
            self.ws = Workspace(facts)
        self.ws.timeout_s = gate_timeout_s
        self._scopes: dict[frozenset[str], tuple[frozenset[str], tuple[str, ...]]] = {}

    def _nats(self, facts: Mapping[str, str], servers: Sequence[str], certs_dir: Path | None,
              prefix: str | None, timeout_s: float) -> Workspace:
        """Every owner's store on NATS JetStream (``icore.net.nats.NatsStore``).

        Each owner's store connects with that owner's certificate (the engine lets it
        write that owner's keys only); several gateways hosting one owner commit
        concurrently (the owner CAS, docs/nats.md). The gate asks the engine through an
        async owner access (concurrent gets plus the quorum barrier).
        """
        from icore.net.nats import DEFAULT_PREFIX, NatsStore
        assert certs_dir is not None
        om = OwnershipMap.from_mapping(facts)
        stores: dict[str, Store] = {}
        try:
            for o in sorted(om.owners()):
                stores[o] = NatsStore(servers, certs_dir=certs_dir, ownership=om, agent=o,
                                      prefix=prefix or DEFAULT_PREFIX, timeout_s=timeout_s)
        except BaseException:
            for st in stores.values():
                st.close()
            raise
        first = stores[min(stores)]
        assert isinstance(first, NatsStore)
        self._gate_owners = first.async_owner_access()
        return Workspace(om, stores=stores, timeout_s=timeout_s, closing=stores.values())

    async def start_serving(self) -> dict[str, int]:
        """Serve the stores of the owners in ``serve`` (icore's owner service, mutual TLS).

        Each runs on the running event loop with the owner's certificate, so other
        gateways and team agents read and validate these owners' facts here.

        Returns:
            Owner -> bound port.

        Raises:
            OSError: an address cannot be bound.
        """
        if not self.serving:
            return {}
        from icore.net import OwnerServer, server_context
        assert self.certs_dir is not None
        for o, (host, port) in sorted(self.serving.items()):
            srv = OwnerServer(self.ws.stores[o], agent=o, host=host, port=port,
                              ssl_context=server_context(self.certs_dir, o))
            self.ports[o] = await srv.start()
            self._servers.append(srv)
        return dict(self.ports)

    async def stop_serving(self) -> None:
        """Stop the owner services of :meth:`start_serving`. Idempotent."""
        while self._servers:
            await self._servers.pop().close()

    # -- facts ------------------------------------------------------------------------
    def owner_of(self, key: str) -> str | None:
        """The owner of ``key`` (None: the key is not a fact and is not versioned)."""
        try:
            return self.ws.owner_of(key)
        except WorkspaceError:
            return None

    def head(self, key: str) -> Record | None:
        """The owner's current version of ``key`` (None: no version yet, or no owner).

        Raises:
            OwnerUnavailable: the owner did not answer.
        """
        if self.owner_of(key) is None:
            return None
        return self.ws.head(key)

    def version_of(self, rec: Record) -> int | None:
        """``rec``'s number among its key's versions (1: the first), or None.

        Counted along the ``supersedes`` chain (each version names the head it replaced,
        its compare-and-set base) in the owner's store of this process, cached per record;
        None when the owner's store is elsewhere or a link is missing.
        """
        got = self._versions.get(rec.id)
        if got is not None:
            return got
        store = self.ws.stores.get(rec.owner)
        chain: list[RecordId] = []
        cur: Record | None = rec
        base = 0
        while cur is not None:
            known = self._versions.get(cur.id)
            if known is not None:
                base = known
                break
            chain.append(cur.id)
            if cur.supersedes is None:
                break
            if store is None:
                return None
            cur = store.get(cur.supersedes)
            if cur is None:
                return None
        for i, rid in enumerate(reversed(chain), start=1):
            self._versions[rid] = base + i
        return self._versions[rec.id]

    def known_keys(self) -> list[str]:
        """Every key with a version, sorted."""
        return sorted({k for s in self.ws.stores.values() for k in s.head_keys()})

    def observe(self, key: str, content: JSONValue, *, type: str = "resource"
                ) -> tuple[Record | None, bool]:
        """Make ``content`` the current version of ``key`` (a new record if it differs).

        "Differs" is by canonical JSON (as :meth:`Workspace.put`): ``1``, ``1.0`` and
        ``true`` are three values, though Python's ``==`` calls them equal.

        The new version cites the one it replaces (its exact parent) and is committed
        with compare-and-set on that head, retried on a lost race.

        Returns:
            ``(record, created)``: the current version (None when the key has no owner,
            not a fact, or its owner is a remote service that writes it itself) and
            whether a new version was committed.

        Raises:
            WorkspaceError: the owner is hosted in another process.
            CommitConflict: still losing races after 8 retries.
            MalformedRecord: ``content`` is not JSON or too large.
        """
        owner = self.owner_of(key)
        if owner is None or owner in self.remote:
            return None, False
        want = canonical_json(content)  # the same JSON, not Python ==: 1, 1.0, true differ
        attempt = 0
        while True:
            cur = self.ws.head(key)
            if cur is not None and canonical_json(cur.content) == want:
                return cur, False
            try:
                # the version replaced is the chain link (supersedes), not an input
                rec = self.ws.commit(key, content, expected=None if cur is None else cur.id,
                                     type=type)
            except CommitConflict:
                attempt += 1
                if attempt > _WRITE_RETRIES:
                    raise
                continue
            return rec, True

    # -- sessions ---------------------------------------------------------------------
    def session(self, sid: str) -> SessionView:
        """The session ``sid`` (its workspace agent; ``/`` in ``sid`` becomes ``_``).

        The owners are stores of this process, so the agent's gate awaits them inline
        (:class:`InlineOwners`) instead of a worker thread per owner.
        """
        name = sid.replace("/", "_")
        agent = self.ws.agent(name)
        v = agent.fence.validator
        if isinstance(v, GateValidator) and self._gate_owners is not None:
            if v.context.owners is not self._gate_owners:  # the engine, asked async
                v.context = replace(v.context, owners=self._gate_owners)
        elif not self.remote and isinstance(v, GateValidator) \
                and not isinstance(v.context.owners, InlineOwners):
            v.context = replace(v.context, owners=InlineOwners(self.ws.owners))
        return SessionView(name, agent)

    def read(self, view: SessionView, key: str, stamp: Hashable | None = None
             ) -> Record | None:
        """``view``'s session reads ``key``: the owner's head, recorded as the version seen.

        ``stamp``: the request the read answers (the agent's read stamp; a call's
        ``turn`` decides whether it counts).

        Raises:
            OwnerUnavailable: the owner did not answer.
        """
        if self.owner_of(key) is None:
            return None
        return view.agent.read_record(key, stamp=stamp)

    async def execute(self, view: SessionView, tool: str, deps: Collection[str],
                      args: Mapping[str, Any], forward: Callable[..., Awaitable[Any]],
                      turn: Hashable | None = None,
                      open_effect: Callable[[Exception | None], str | None] | None = None
                      ) -> Verdict:
        """Run one protected call of ``view``'s session (planfence Alg. 1, App. A.3).

        ``forward(**args)`` (the call to the upstream) is awaited only when the gate
        authorized the action record derived from the versions the session read of D(a)
        that count for ``turn`` (the workspace's ``turn``: for the gateway, the call's
        request exchange, so only reads answered before it arrived count).
        ``open_effect(exc)``: for an exception ``forward`` raised, the error text when it
        leaves the call's effect open (sent, no answer: it may have run), else None;
        ``open_effect(None)`` after ``forward`` returned: the text when its result is
        open to the agent all the same (it never reached the client). An open effect
        spends the session's reads of D(a) as an error result's does
        (:mod:`icore.workspace._unknown`: a repeat needs a fresh read). None: only an
        error result (``may_have_run``) spends them.

        Returns:
            :class:`Verdict`. Refused: ``not_read`` (a fact never read: its current
            version handed over, now read), ``stale`` (first change: fresh versions
            handed over; the session's next call of the tool is the one replan),
            ``second_change``, ``owner_unavailable`` and every other gate reason (fail
            closed), ``args_not_json``.

        Raises:
            Exception: whatever ``forward`` raises once authorized.
        """
        fdeps = deps if isinstance(deps, frozenset) else frozenset(deps)
        # one D(a) object per distinct scope: the agent reuses its protected tool for it
        got = self._scopes.get(fdeps)
        if got is None:
            got = self._scopes[fdeps] = (fdeps, tuple(sorted(fdeps)))
        scope, dset = got
        before = view.agent.seen()  # a snapshot (a new dict)
        n0 = len(view.agent.log)
        failed: list[BaseException] = []

        async def forwarded(**a: Any) -> Any:
            # the upstream's failure is the gateway's to answer ("may have run"), raised
            # to the caller after the gate; one that was sent and got no answer spends
            # the session's reads, as an error result does (#30, h35gw)
            try:
                got = await forward(**a)
            except BaseException as exc:
                failed.append(exc)
                said = open_effect(exc) if open_effect is not None and isinstance(
                    exc, Exception) else None
                return None if said is None else _Unanswered(said)
            said = open_effect(None) if open_effect is not None and getattr(
                got, "may_have_run", False) is not True else None
            return got if said is None else _Unanswered(said, got)

        call = await view.agent.aexecute(tool, forwarded, args, depends_on=scope, turn=turn)
        if failed:
            raise failed[0]
        if isinstance(call.value, _Unanswered):  # spent: the value as it came
            call = replace(call, value=call.value.value)
        # this call's decisions: its result's (one or two), without copying the session's
        # whole decision log on every call
        decisions = call.result.decisions if call.result is not None \
            else tuple(list(view.agent.log)[n0:]) if len(view.agent.log) > n0 else ()
        changed: dict[str, Record] = {}
        stale: tuple[str, ...] = ()
        if call.reason == NOT_READ:
            stale = self._hand_over_stale(view, dset, before, call, turn)
            if stale:
                call = replace(call, detail=f"{call.detail}; changed since read (fresh "
                               f"values handed over): {', '.join(stale)}")
        if call.reason in (Reason.STALE.value, NOT_READ):
            after = view.agent.seen()
            changed = {k: r for k in dset if (r := after.get(k)) is not None
                       and (k not in before or before[k].id != r.id or k in call.fresh)}
        elif call.reason == Reason.SECOND_CHANGE.value:
            after = view.agent.seen()
            for k in dset:
                try:
                    h = self.head(k)
                except IcoreError:
                    continue
                if h is not None and (k not in after or after[k].id != h.id):
                    changed[k] = h
        return Verdict(call, decisions, dset, changed, stale)

    def _hand_over_stale(self, view: SessionView, deps: Iterable[str],
                         before: Mapping[str, Record], call: Call,
                         turn: Hashable | None) -> tuple[str, ...]:
        """Hand over, with a ``not_read`` refusal, the facts read that are stale too.

        A ``not_read`` call is refused before the gate, so a fact of D(a) the session did
        read but whose version is no longer the owner's head would only be refused
        ``stale`` at the next call (two refusals, two replans: QA r7-mcp D3). Each such
        fact is read now, in the call's turn (like the unread ones: it counts from the
        session's next message), so one new plan from the values handed over can pass.

        Returns:
            The keys handed over so, sorted. A fact whose owner does not answer is
            skipped (the refusal stands; the next call's gate asks the owner again).
        """
        out = []
        for k in sorted(deps):
            old = before.get(k)
            if old is None or k in call.fresh:  # never read, or read just now
                continue
            try:
                head = self.head(k)
                rec = self.read(view, k, turn) if head is not None and head.id != old.id \
                    else None
            except Exception:  # the refusal stands without this hand-over
                continue
            if rec is not None and rec.id != old.id:
                out.append(k)
        return tuple(out)

    def close(self) -> None:
        """Close the owners' stores (SQLite files flushed)."""
        self.ws.close()
