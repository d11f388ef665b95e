"""An owner service whose store file is replaced under it stops serving heads (#29).

The owner (``icore serve``'s exclusive store, heads from its in-memory table) keeps
running while another process deletes its folder and makes a new store there; a
validation over real TLS on 127.0.0.1 must then be refused ``owner_unavailable``, never
answered from the table of the orphaned file.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from icore.errors import RemoteError
from icore.memory import OwnershipMap, SQLiteStore
from icore.net import OwnerClient, ServerThread, client_context, server_context
from icore.records import Record

OM = OwnershipMap.from_mapping({"req/*": "a"})

pytestmark = pytest.mark.timeout(120)

# another process: delete the folder, open a new store at the same path, commit there
REMAKE = textwrap.dedent("""
    import shutil, sys
    from pathlib import Path
    from icore.memory import OwnershipMap, SQLiteStore
    from icore.records import Record
    db = Path(sys.argv[1])
    shutil.rmtree(db.parent)
    with SQLiteStore(db, OwnershipMap.from_mapping({"req/*": "a"}), "a") as st:
        st.commit(Record.create(key="req/x", owner="a", seq=1, content={"v": "new"}),
                  writer="a")
""")


def test_a_remade_folder_is_not_served_from_the_owners_memory(tmp_path: Path,
                                                              certs: Path) -> None:
    """Heads served before the folder is re-made; refused after, naming the path."""
    db = tmp_path / "owner" / "a.sqlite"
    store = SQLiteStore(db, OM, "a", exclusive=True)
    old = Record.create(key="req/x", owner="a", seq=1, content={"v": "old"})
    store.commit(old, writer="a")
    with ServerThread(store, agent="a", ssl_context=server_context(certs, "a")) as server:

        async def ask() -> object:
            c = OwnerClient({"a": server.address}, identity="a",
                            ssl_context=client_context(certs, "a"))
            try:
                return await c.query_heads("a", ["req/x"])
            except RemoteError as exc:
                return exc
            finally:
                await c.close()

        before = asyncio.run(ask())
        assert not isinstance(before, RemoteError)
        assert before.heads["req/x"].record_id == old.id  # type: ignore[attr-defined]
        done = subprocess.run([sys.executable, "-c", REMAKE, str(db)], capture_output=True,
                              text=True, timeout=60, check=False)
        assert done.returncode == 0, done.stderr
        after = asyncio.run(ask())
    assert isinstance(after, RemoteError), after
    assert after.fields["remote_code"] == "owner_unavailable"
    assert str(db) in str(after)
    store.close()
