"""What the trace keeps of a protected call's arguments too large to record (QA qa-new18b #7).

A call refused ``args_too_large`` (its arguments over the action record's 4 MiB limit)
was refused because they are too large to record, yet its trace line held them whole: a
client could put up to ``max_message_mb`` into the trace with each refused call. The
line keeps a bounded stand-in instead (:func:`recorded_args`): their size, SHA-256 and
first KiB. Pure: no I/O.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

PREFIX_CHARS = 1024
"""Characters of the arguments' JSON kept on the trace line (their start)."""

KEPT = (f"the trace keeps only their size, SHA-256 and first {PREFIX_CHARS} characters "
        "(icore/args_bytes, icore/args_sha256, icore/args_prefix)")
"""What the refusal's detail says is recorded of such arguments."""


def recorded_args(args: Mapping[str, Any]) -> dict[str, Any]:
    """The stand-in recorded for ``args``: their JSON's size, SHA-256 and first KiB.

    Returns:
        ``{"icore/args_bytes": int (UTF-8 bytes of the sorted-keys JSON),
        "icore/args_sha256": hex str, "icore/args_prefix": str (at most
        :data:`PREFIX_CHARS` characters)}``.
    """
    said = json.dumps(dict(args), default=str, ensure_ascii=False, sort_keys=True)
    data = said.encode("utf-8", "surrogatepass")
    return {"icore/args_bytes": len(data), "icore/args_sha256": hashlib.sha256(data).hexdigest(),
            "icore/args_prefix": said[:PREFIX_CHARS]}


__all__ = ["KEPT", "PREFIX_CHARS", "recorded_args"]
