"""What a protected call's answer says of its effect: ran, or outcome unknown.

Split from :mod:`icore.mcp._gateway_calls` (module size; QA qa-new15b S2). The gateway
authorized and forwarded the call; the upstream answered. Three answers are no plain
result:

- a success whose ``structuredContent`` breaks the tool's ``outputSchema``: the call
  **ran** (the upstream said so). The client gets an ``isError`` with the schema's
  complaint and the words "it ran", ``_meta`` ``{"icore/upstream": {"ran": true}}``;
  the trace keeps it as a call that ran (its ``tool_output`` line ``error`` with
  ``ran: true``; the decision is not failed: ``icore audit`` counts it ``valid``).
- an ``isError`` result: an MCP server's error result does not say that nothing was
  done (the TypeScript SDK's ``McpServer`` turns any throw of the handler, or a result
  that breaks its own ``outputSchema`` after the handler committed, into one), so, as an
  in-process tool that raised anything but ``NoEffect`` (README), the call's **outcome
  is unknown**: the model is told to check its effect first, the session's reads of
  D(a) are spent (:mod:`icore.workspace._unknown`: a repeat needs a fresh read), the
  trace has ``may_have_run: true`` (``icore audit``: ``outcome unknown``). Evidence
  decides otherwise: a resource the tool ``writes`` read again after the call at a new
  version means it **ran** (as above). A tool whose server's error results are known
  to mean "did nothing" is declared ``error_means_no_effect: true`` in the manifest:
  its ``isError`` is then ``failed after authorization`` (no effect, reads kept).
- anything else is a result, forwarded as is.

The re-read of a tool's ``writes`` after its call (:func:`write_back`) is here too: it
makes the change a new version at once and is the evidence that an error result ran.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from icore.errors import IcoreError
from icore.mcp._deps import expand_deps
from icore.workspace import check_first

RAN = "ran"
"""The kind of an answer that proves the call ran (a success refused for its schema,
or an error result after which the tool's ``writes`` moved)."""
OPEN = "open"
"""The kind of an error result whose effect is open (outcome unknown)."""


@dataclass(frozen=True, slots=True)
class Answered:
    """A protected call's answer that is no plain result (returned through the gate).

    The workspace reads ``may_have_run`` and ``error``
    (:func:`icore.workspace._unknown.failure_of`) and spends the session's reads of
    D(a): the agent must read again before a repeat is authorized.

    Attributes:
        result: the ``CallToolResult`` the client gets (``isError``).
        error: its text (``Type: message`` style, for the session's refusal of a repeat).
        kind: :data:`RAN` or :data:`OPEN`.
        may_have_run: always True (the workspace's marker of an open effect).
    """

    result: Any
    error: str
    kind: str
    may_have_run: bool = True


def judge(tool: str, result: Any, *, schema_problem: str | None,
          no_effect: bool, error: bool, text: str) -> Any:
    """The answer of an authorized protected call: ``result`` or an :class:`Answered`.

    Args:
        tool: the tool's name.
        result: the upstream's ``CallToolResult``.
        schema_problem: what breaks the tool's ``outputSchema`` (None: it fits).
        no_effect: the tool's ``error_means_no_effect`` (its error results mean "did
            nothing": failed after authorization).
        error: the result has ``isError``.
        text: the result's text (:func:`~icore.mcp._gateway_forward.result_text`).
    """
    from icore.mcp._gateway_refusal import error_result
    if schema_problem is not None and not error:
        said = (f"{schema_problem}; the gateway does not forward a result that breaks the "
                "tool's outputSchema (MCP: a server MUST conform to it). The upstream "
                f"answered success, so {tool} ran: do not call it again to repeat it")
        return Answered(error_result(said, meta={"icore/upstream": {"ran": True}}),
                        f"{tool} ran; its result broke the outputSchema", RAN)
    if not error or no_effect:
        return result
    said = (f"{tool} ended with an error result after the gateway forwarded it; an MCP "
            "server's error result does not say that nothing was done, so its outcome is "
            f"unknown: {check_first(tool)}")
    return Answered(_with_text(result, said, {"may_have_run": True}),
                    f"error result: {text[:300]}", OPEN)


def ran_after_all(answered: Answered, tool: str, moved: list[str]) -> Answered:
    """``answered`` (an error result) as a call that ran: its ``writes`` ``moved``."""
    said = (f"the gateway read {', '.join(moved)} again after the call: a new version, so "
            f"{tool} ran despite its error result: do not call it again to repeat it")
    plain = _with_text(answered.result, "", None)
    return Answered(_with_text(plain, said, {"ran": True, "moved": moved}),
                    answered.error, RAN)


def outcome_fields(answered: Answered | None) -> dict[str, bool]:
    """The trace fields of a call's answer: ``ran`` (not failed) or ``may_have_run``."""
    if answered is None:
        return {}
    return {"ran": True} if answered.kind == RAN else {"may_have_run": True}


def write_uris(writes: Any, args: Mapping[str, Any]
               ) -> tuple[list[str], list[tuple[str, IcoreError]]]:
    """The URIs of a tool's ``writes`` for a call (``{arg}`` filled from ``args``).

    Returns ``(uris, skipped)``: ``skipped`` the entries that could not be filled, each
    with its error.
    """
    uris: list[str] = []
    skipped: list[tuple[str, IcoreError]] = []
    for w in writes:  # {arg} filled from the call, as in D(a) (QA r5-mcp D1)
        try:
            uris += sorted(expand_deps([w], args, ()))
        except IcoreError as exc:
            skipped.append((w, exc))
    return uris, skipped


def heads_before(facts: Any, uris: list[str]) -> dict[str, str | None]:
    """URI -> the id of its local head before the call (None: none, or unreadable).

    A URI whose owner is remote (another host's store) is left out: no evidence, and no
    network query on the call's path.
    """
    out: dict[str, str | None] = {}
    for uri in uris:
        if facts is None or facts.owner_of(uri) in facts.remote:  # no remote query here
            continue
        try:
            h = facts.head(uri)
        except Exception:  # an owner that does not answer: no evidence either way
            h = None
        out[uri] = None if h is None else h.id
    return out


async def write_back(resources: Any, trace: Any, wrote: dict[str, Any], sid: str,
                     tool: str, writes: Any, args: Mapping[str, Any],
                     before: Mapping[str, str | None]) -> list[str]:
    """Read the resources a call of ``tool`` ``writes`` again from their upstream.

    Each change becomes a new version at once (``wrote``: URI -> ``(record id, sid,
    tool)`` of the version this call made, for a later refusal to say so). Returns the
    URIs read at a version other than ``before`` (the heads before the call, taken
    when it was forwarded): the evidence that the call ran.
    """
    uris, skipped = write_uris(writes, args)
    for w, exc in skipped:
        trace.note("gateway", f"re-read of {w} after {tool} skipped: {exc}")
    moved = []
    for uri in uris:
        rec = await resources.reread(uri, f"{sid} via {tool}")
        if rec is not None:  # the version this call made (a refusal says so)
            wrote[uri] = (rec.id, sid, tool)
            if uri in before and before[uri] is not None and before[uri] != rec.id:
                moved.append(uri)
    return moved


def _with_text(result: Any, said: str, meta: dict[str, Any] | None) -> Any:
    """``result`` (the wire dict) with a text block ``said`` and ``_meta["icore/upstream"]``.

    ``said`` empty and ``meta`` None: the block and key added earlier taken off again.
    """
    if not isinstance(result, Mapping):  # a CallToolResult: as its wire dict
        result = result.model_dump(by_alias=True, exclude_none=True, mode="json")
    content = list(result.get("content") or [])
    last = content[-1] if content else None
    if isinstance(last, Mapping) and str(last.get("text", "")).startswith(_NOTE):
        content = content[:-1]
    if said:
        content.append({"type": "text", "text": _NOTE + said})
    old = dict(result.get("_meta") or {})
    old.pop("icore/upstream", None)
    if meta is not None:
        old["icore/upstream"] = meta
    out = {k: v for k, v in result.items() if k != "_meta"}
    out["content"] = content
    if old:
        out["_meta"] = old
    return out


_NOTE = "icore gateway: "
"""How the text block the gateway adds to an upstream's error result starts."""


__all__ = ["OPEN", "RAN", "Answered", "heads_before", "judge", "outcome_fields",
           "ran_after_all", "write_back", "write_uris"]
