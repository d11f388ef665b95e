"""icore's owner service as a system of ``icore bench peers`` (issue 27).

:class:`IcoreSystem` serves owner memory over mutual-TLS TCP (:mod:`icore.net`); its
connections validate through the gate's head queries and commit through the owner
service. The interface is :mod:`icore_lab.bench.micro._peers_systems`.
"""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path

from icore.fence import Outcome, avalidate
from icore.memory import MemoryStore, OwnershipMap
from icore.net import (
    OwnerClient,
    SyncOwnerClient,
    TeamProcesses,
    client_context,
    init_team_certs,
)
from icore.records import Record, derive
from icore_lab.bench.micro._peers_systems import D_VALUES, Conn, System, writer_key

_OM = OwnershipMap.from_mapping({"req/*": "owner", "w/*": "owner", "plan/*": "planner"})


class IcoreSystem(System):
    """icore's owner service (``icore serve``: SQLite memory behind mutual TLS 1.3)."""

    def __init__(self, *, gate: bool, synchronous: str = "NORMAL") -> None:
        self.gate = gate
        self.synchronous = synchronous
        self.name = ("icore gate" if gate else "icore query_heads") + (
            "" if synchronous == "NORMAL" else f" ({synchronous})")
        self._team: TeamProcesses | None = None
        self._addr: tuple[str, int] = ("127.0.0.1", 0)
        self.certs = Path()
        self.local = MemoryStore(_OM, "planner")
        self.plans: dict[int, Record] = {}
        self.reqs: list[Record] = []
        self.seq = 0
        """The owner's last used sequence."""

    async def start(self, tmp: Path) -> None:
        """Start ``icore serve`` for the owner; seed requirements at the owner, plans locally.

        Under a fresh folder of ``tmp``: team certificates (mutual TLS 1.3) and a manifest with
        SQLite ``synchronous`` as configured. Commits the requirement records ``req/1..8`` at the
        owner, installs them in the planner's local replica and derives one plan per d in
        :data:`D_VALUES` citing the first d of them (the gate's roots, planfence Alg. 1).

        Args:
            tmp: a scratch folder; the system makes its own subfolder in it.
        """
        base = Path(tempfile.mkdtemp(prefix="icore-", dir=tmp))
        self.certs = base / "certs"
        init_team_certs(self.certs, ["owner", "planner"], team="peers")
        manifest = base / "team.yaml"
        manifest.write_text(
            f"version: 1\nteam: peers\ndata_dir: data\ncerts_dir: certs\n"
            f"synchronous: {self.synchronous}\nagents:\n"
            "  - {id: owner, host: 127.0.0.1, port: 0}\n"
            "  - {id: planner, host: 127.0.0.1, port: 0}\n"
            "ownership:\n  'req/*': owner\n  'w/*': owner\n  'plan/*': planner\n")
        self._team = await asyncio.to_thread(TeamProcesses(manifest, agents=["owner"]).start)
        self._addr = self._team.addresses()["owner"]
        self.pid = self._team.procs["owner"].proc.pid
        self.reqs = [Record.create(key=f"req/{i}", owner="owner", seq=i, content={"v": i})
                     for i in range(1, max(D_VALUES) + 1)]

        def seed() -> None:
            with SyncOwnerClient({"owner": self._addr}, identity="owner",
                                 ssl_context=client_context(self.certs, "owner")) as w:
                for r in self.reqs:
                    w.commit("owner", r)

        await asyncio.to_thread(seed)
        self.seq = len(self.reqs)
        for r in self.reqs:
            self.local.install(r)
        for d in D_VALUES:
            plan = derive(key=f"plan/{d}", owner="planner", seq=d, content={"d": d},
                          inputs=self.reqs[:d])
            self.local.install(plan)
            self.plans[d] = plan

    @property
    def port(self) -> int:
        """The owner service's TCP port on 127.0.0.1 (valid after :meth:`start`)."""
        return self._addr[1]

    async def connect(self, writer: int = 0, *, port: int | None = None) -> Conn:
        """A new owner client over mutual TLS, pinged once.

        Args:
            writer: index of the writer this connection commits for (part of its key).
            port: connect to this port instead of the server's (the byte relay).
        """
        client = OwnerClient({"owner": ("127.0.0.1", port or self.port)}, identity="owner",
                             ssl_context=client_context(self.certs, "owner"))
        await client.ping("owner")
        return _IcoreConn(self, client, writer)

    async def writers(self, n: int) -> tuple[list[Conn], list[Conn]]:
        """``n`` writers of the one owner, sharing its connection to its memory service."""
        client = OwnerClient({"owner": ("127.0.0.1", self.port)}, identity="owner",
                             ssl_context=client_context(self.certs, "owner"))
        await client.ping("owner")
        conns: list[Conn] = [_IcoreConn(self, client, i, owns_client=False)
                             for i in range(n)]
        return conns, [_SharedClose(client)]

    async def stop(self) -> None:
        """Stop the team's owner process; a no-op before :meth:`start`."""
        if self._team is not None:
            await asyncio.to_thread(self._team.stop)


class _IcoreConn(Conn):
    def __init__(self, sys_: IcoreSystem, client: OwnerClient, writer: int, *,
                 owns_client: bool = True) -> None:
        self.system, self.client, self.owns_client = sys_, client, owns_client
        self.key = writer_key(writer)
        self.prev: Record | None = None

    async def validate(self, d: int) -> None:
        """Check that the first ``d`` requirements are current (the gate or raw ``query_heads``).

        With ``gate``: the PlanFence gate ``avalidate`` (planfence Alg. 1) on the plan citing
        them, which must authorize. Without: one batched ``query_heads``, which must return d
        heads.

        Raises:
            RuntimeError: the gate did not authorize, or the owner returned another number of
                heads than ``d``.
        """
        keys = [f"req/{i}" for i in range(1, d + 1)]
        if self.system.gate:
            dec = await avalidate(roots=[self.system.plans[d].id], deps=keys,
                                  lookup=self.system.local.lookup, ownership=_OM,
                                  owners=self.client)
            if dec.outcome is not Outcome.AUTHORIZED:
                raise RuntimeError(f"icore gate decided {dec.outcome}: {dec.detail}")
        else:
            reply = await self.client.query_heads("owner", keys)
            if len(reply.heads) != d:
                raise RuntimeError(f"icore returned {len(reply.heads)} heads for {d} keys")

    async def commit(self) -> None:
        # the owner sequence is per owner (planfence App. A): the owner's writers take it
        # from one counter, in the order their requests leave on the shared connection
        """Commit this writer's next version of its key at the owner, citing the previous one.

        The owner sequence is per owner (planfence App. A): it comes from the system's one
        counter. The first version has no parent.
        """
        self.system.seq += 1
        seq = self.system.seq
        rec = (Record.create(key=self.key, owner="owner", seq=seq, content={"n": seq})
               if self.prev is None else
               derive(key=self.key, owner="owner", seq=seq, content={"n": seq},
                      inputs=[self.prev]))
        await self.client.commit("owner", rec)
        self.prev = rec

    async def close(self) -> None:
        """Close the client when this connection owns it (shared: see :class:`_SharedClose`)."""
        if self.owns_client:
            await self.client.close()


class _SharedClose(Conn):
    """Closes the owner's shared client once its writers are done."""

    def __init__(self, client: OwnerClient) -> None:
        self.client = client

    async def validate(self, d: int) -> None:  # pragma: no cover - never measured
        """Not measured on this connection.

        Raises:
            NotImplementedError: always.
        """
        raise NotImplementedError

    async def commit(self) -> None:  # pragma: no cover - never measured
        """Not measured on this connection.

        Raises:
            NotImplementedError: always.
        """
        raise NotImplementedError

    async def close(self) -> None:
        """Close the owner's shared client."""
        await self.client.close()
