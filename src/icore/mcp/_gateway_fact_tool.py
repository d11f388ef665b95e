"""The gateway's own fact tools (``icore_get_fact``, ``icore_put_fact``).

Split from :mod:`icore.mcp._gateway_calls` (module size). The owner check of a put is the
caller's (``_ToolCalls._not_owner``).
"""

from __future__ import annotations

import json
import re
from typing import Any

from icore.errors import IcoreError
from icore.mcp._facts import SessionView
from icore.mcp._gateway_manifest import FACT_SCHEME
from icore.mcp._gateway_read_tool import GET_FACT, PUT_FACT
from icore.mcp._gateway_refusal import error_result as _error_result
from icore.workspace import GLOB_CHARS


async def fact_tool(gw: Any, resources: Any, view: SessionView, name: str,
                    args: dict[str, Any], ex: Any = None) -> Any:
    """``icore_get_fact`` / ``icore_put_fact`` of a session (``gw``: the gateway).

    A fact's key is checked (a string under ``fact://``, no pattern, no control or bidi
    character in a written one, an owner in ``facts.owners``); a read is traced and
    answered with its version; a write is observed as the owner's new version (traced,
    subscribers notified) and read by the writer. A bad call is an ``isError`` result.
    """
    from mcp_types import CallToolResult, TextContent
    assert gw.facts is not None
    key = args.get("key")
    if not isinstance(key, str) or not key.startswith(FACT_SCHEME):
        return _error_result(f"{name}: key must be a string starting with {FACT_SCHEME}")
    if any(c in key for c in GLOB_CHARS):
        head = key[:min(key.index(c) for c in GLOB_CHARS if c in key)]
        return _error_result(f"{name}: {key} is a pattern, not a fact: '*', '?' and '[' "
                             "only declare owners (facts.owners); give one fact's key "
                             f"(e.g. {head}NAME)")
    if name == PUT_FACT and (odd := _KEY_CONTROL.search(key)) is not None:
        return _error_result(f"{name}: {key.encode('unicode_escape').decode()[:200]} "
                             f"holds {odd.group()!a}, {_CONTROL_SAID}")
    if gw.facts.owner_of(key) is None:
        return _error_result(f"{name}: fact {key} has no owner in the gateway manifest "
                             "(facts.owners)")
    if name == GET_FACT:
        rec = resources.read(view, key, ex)
        if rec is None:
            return _error_result(f"{GET_FACT}: no fact {key} yet")
        gw.trace.read(view.sid, key, rec)
        value = rec.content
        return CallToolResult(content=[TextContent(type="text", text=json.dumps(
            value, ensure_ascii=False))],
                              structured_content={"key": key, "value": value,
                                                  **resources.version_meta(rec)})
    if "value" not in args:
        return _error_result(f"{PUT_FACT}: value is required")
    if gw.facts.owner_of(key) in gw.facts.remote:
        return _error_result(f"{PUT_FACT}: fact {key} is owned by "
                             f"{gw.facts.owner_of(key)}, a team agent serving its own "
                             "store; it writes the fact there")
    try:
        rec, created = gw.facts.observe(key, args["value"], type="fact")
    except IcoreError as exc:
        return _error_result(f"{PUT_FACT}: {exc}")
    assert rec is not None
    if created:
        gw.trace.version(rec, view.sid)
        await resources.notify_subscribers(key)
    resources.read(view, key, ex)  # the writer knows the value it wrote
    gw.trace.call(view.sid, PUT_FACT, args, f"{key} seq {rec.seq}", error=False)
    owner = gw.facts.owner_of(key)
    said = ("written" if created else "unchanged (the value was already current)")
    # seq counts the owner's records over all its keys; version: this key's own
    n = gw.facts.version_of(rec)
    return CallToolResult(content=[TextContent(type="text", text=(
        f"{key} {said}; its head is version {n} (record seq {rec.seq} of owner "
        f"{owner})"))], structured_content={"key": key, "seq": rec.seq, "version": n,
                                            "owner": owner, "changed": created})


_KEY_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u200e\u200f\u2028\u2029\u202a-\u202e"
                          "\u2066-\u2069]")
"""Control, line-separator and bidi characters a fact's key written by ``icore_put_fact``
may not hold (QA qa-new10c S4)."""
_CONTROL_SAID = ("a control or bidi character: a fact's key is shown in refusals, traces "
                 "and reports, where such a character makes it read as another key (a "
                 "right-to-left override reverses what follows). Nothing was written; "
                 "use a key of printable characters")


__all__ = ["fact_tool"]
