"""A writer process for the concurrency tests: ``python _writer_proc.py DB``.

Reads JSON lines on stdin. ``{"arm": <b64 record>, "expected": <id|null|"parents">}``
prepares one commit and answers ``armed``; ``go`` runs it against its own
:class:`~icore.memory.SQLiteStore` on ``DB`` and answers ``{"created": bool}`` or
``{"conflict": "<ErrorCode>"}``; ``quit`` (or EOF) closes the store and exits.
"""

from __future__ import annotations

import base64
import json
import sys

from icore.errors import CommitConflict
from icore.memory import FROM_PARENTS, ExpectedHead, OwnershipMap, SQLiteStore
from icore.records import decode_record

OWNERSHIP = OwnershipMap({}, {"hot/*": "w"})


def main(db: str) -> None:
    store = SQLiteStore(db, OWNERSHIP, "w")
    armed = None
    expected: ExpectedHead = FROM_PARENTS
    print("ready", flush=True)
    for line in sys.stdin:
        msg = line.strip()
        if msg == "quit":
            break
        if msg == "go":
            assert armed is not None
            try:
                res = store.commit(armed, writer="w", expected_head=expected)
                out: dict[str, object] = {"created": res.created}
            except CommitConflict as exc:
                out = {"conflict": str(exc.code)}
            print(json.dumps(out), flush=True)
            continue
        job = json.loads(msg)
        armed = decode_record(base64.b64decode(job["arm"]))
        exp = job["expected"]
        expected = FROM_PARENTS if exp == "parents" else exp
        print("armed", flush=True)
    store.close()


if __name__ == "__main__":
    main(sys.argv[1])
