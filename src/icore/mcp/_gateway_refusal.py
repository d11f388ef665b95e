"""The texts of the gateway's refusals and error results (what the model reads).

A protected call the gate refused (:func:`refusal`) or the gateway refused before the gate
(``_ToolCalls._refuse``) is a ``CallToolResult(isError=true)`` whose text starts with
:func:`~icore.integrations.refusal_head`, says why (:data:`HINT`, by reason code) and
what to do (the one replan, planfence App. A.3), with the values handed over.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from icore.fence import Reason
from icore.integrations import refusal_head
from icore.mcp._facts import Verdict, describe
from icore.workspace import key_args, unwritten_hint

HINT = {
    Reason.STALE.value: "the facts this call was planned from changed; their fresh values "
    "are below. Re-plan from them and call again (this is the one replan): choose the "
    "arguments from the fresh values; do not resend it unchanged without checking them "
    "(the audit flags a replan resent unchanged)",
    Reason.SECOND_CHANGE.value: "the facts changed again after their fresh values were "
    "handed over, so this plan had its one replan (reading those same versions again does "
    "not start a new plan). Do not retry with this plan: read the resources named below "
    "again now (they have newer versions), then plan from them, or report it",
    "not_read": "this call depends on facts this session has not read before sending "
    "it (a read answered after the call was sent, such as one by a tool of the same "
    "model message, does not count); their current values are below (now read). Plan "
    "from them and call again",
    "no_session": "this request reached the gateway over HTTP without an MCP session "
    "(protocol 2026-07-28 is stateless) and without a client identity, so the gateway "
    "cannot tie this call to the resources this client read. Retrying cannot help: the "
    "operator must give each client a bearer token in the gateway manifest (http.clients: "
    "NAME: {token_env: VAR}) and configure the client to send it (Authorization: Bearer "
    "...), or connect this client with the handshake protocol (e.g. the MCP SDK's "
    "Client(url, mode='legacy'))",
    "dependency_unreadable": "a resource this call depends on could not be read from the "
    "upstream that serves it, so the call was not made (fail closed)",
    "unverified_protection": "the gateway manifest protects a tool name no reachable "
    "upstream serves yet, and this tool may be the one it means; it is blocked until the "
    "gateway can tell (fail closed). Do not retry; report it to the operator",
    Reason.MISSING_BOUNDARY.value: "the call does not derive from a version of every fact "
    "the tool depends on; read them and call again",
    Reason.OWNER_UNAVAILABLE.value: "an owner of the facts this call depends on did not "
    "answer (for a resource: the upstream serving it); the call was not made (fail "
    "closed). Try again later",
    Reason.ARGS_MISMATCH.value: "the call's arguments could not be bound to a plan",
    "invalid_arguments": "the call's arguments do not fit the tool's input schema, so it "
    "was not made (nothing was validated or sent upstream). Fix the argument named below "
    "and call again",
    Reason.NO_OWNER.value: "a fact this call depends on has no owner in the gateway "
    "manifest (a configuration error); do not retry",
    "gateway_stopping": "the gateway is stopping, so this call was not run (nothing was "
    "sent upstream)",
    "write_unknown": "a gateway sharing these write claims (another one, or an earlier run "
    "of this one that was killed) stopped while a call of it that writes facts this call "
    "depends on was in flight, so that write's "
    "outcome is unknown and this call was not made (fail closed). Read the facts this "
    "call depends on again (named in Detail), plan from them and call again",
    "claims_unavailable": "the write claims this gateway shares with the other gateways "
    "of its store could not be read, so whether another gateway is writing the facts this "
    "call depends on cannot be told, and the call was not made (fail closed). Try again "
    "later; if it persists, report it to the operator (the file is named in Detail)",
    "not_owner": "only a fact's owner writes it (planfence's owner rule), and this "
    "session does not speak for the owner. Do not retry; the operator can allow it (see "
    "Detail)",
}


def refusal(name: str, v: Verdict, *, first_read: bool = False,
             late: list[str] | None = None, version_of: Any = None,
             own: Mapping[str, str] | None = None, stopping: bool = False) -> Any:
    """The ``isError`` result of a call the gate refused: what changed, what to do.

    ``first_read``: the session had read nothing before this call (a ``not_read``
    refusal then says that only a call in this same session can pass: a client that
    opens a new session per tool call is refused every time). ``late``: keys this
    session did read, but whose answer had not been sent when the call arrived, or of
    the call's own turn (a read of the same model message: QA r6-oa D1). ``version_of``:
    a record -> its key's version number (``FactBook.version_of``), shown with each value
    handed over. ``own``: key -> the tool of this session whose write made the version
    handed over (its own earlier call changed what this plan read: said so, QA qa-new9b).
    ``stopping``: the gateway got a stop signal while the call was in flight; the text
    then says not to call again through it (every new call is refused
    ``gateway_stopping``), never "call again" (QA qa-new10c S4).
    """
    own = own or {}
    reason = v.reason
    lines = [f"{refusal_head(name, reason)}: "
             f"{HINT.get(reason, 'the call was refused (fail closed)')}."]
    unwritten = tuple(v.call.unwritten) if reason == "not_read" else ()
    if unwritten:  # reading cannot help: there is no value to plan from (the one text
        lines[0] = (f"{refusal_head(name, 'not_read')}: "  # of the in-process tools too)
                    f"{unwritten_hint(unwritten, name, key_args(unwritten, v.call.args))}.")
    elif reason == "not_read" and late:
        lines[0] = (f"{refusal_head(name, 'not_read')}: this session's read of "
                    f"{', '.join(late)} was not answered before this call was sent (a read "
                    "in the same model message as the call, of the same icore/turn, or of a "
                    "named icore/turn when this call names none), "
                    "so the call cannot have been planned from it. Their current values "
                    "are below: plan from them and call again in a later message.")
    elif reason == "not_read" and first_read:
        lines[0] = (f"{refusal_head(name, 'not_read')}: this MCP session had not read "
                    "the facts this call depends on before sending it (a read answered "
                    "later, as by a tool of the same model message, does not count); the "
                    "gateway ties a call to what the same session read. Their current "
                    "values are below, now read in this session: plan from them and call "
                    "again in this same session (a client that opens a new session for "
                    "each tool call is refused every time; keep one session open).")
    if v.stale:  # read, but no longer current: handed over too, so one replan (D3)
        lines.append(f"Also changed since this session read "
                     f"{'it' if len(v.stale) == 1 else 'them'}: {', '.join(v.stale)} "
                     "(the fresh values are below, now read): plan from all the values "
                     "below at once.")
    if own:
        lines.append("This session's own earlier call changed "
                     + ", ".join(f"{k} (its call {t})" for k, t in sorted(own.items()))
                     + " after this plan read it: plan from the values below, which "
                     "include that change.")
    if v.changed and reason != Reason.SECOND_CHANGE.value:
        lines.append("Current values:")
        lines.extend(f"- {describe(r, version_of(r) if version_of else None)}"
                     + (f" (changed by this session's call {own[k]})" if k in own else
                        " (changed since read)" if k in v.stale else "")
                     for k, r in v.changed.items())
    elif v.changed:
        lines.append("Changed: " + ", ".join(sorted(v.changed)))
    elif reason == "not_read" and not unwritten:  # nothing could be handed over
        lines[0] = (f"{refusal_head(name, 'not_read')}: this call depends on facts this "
                    "session has not read, and their current values could not be read. "
                    "Read them and call again.")
    if reason == "not_read" and v.call.spent:  # an unknown outcome used the reads (15b)
        lines[0] = f"{refusal_head(name, reason)}: {v.call.detail}. Nothing ran now."
    if stopping:
        lines[0] = f"{refusal_head(name, reason)}: {STOPPING}"
    if v.call.detail and reason not in (Reason.STALE.value, "not_read"):
        lines.append(f"Detail: {v.call.detail}")
    return error_result("\n".join(lines), meta={"icore/gate": {
        "reason": reason, "deps": list(v.deps),
        "changed": {k: _version(r, version_of) for k, r in v.changed.items()},
        **({"stale": list(v.stale)} if v.stale else {})}})


STOPPING = ("the gate refused this call, and the gateway received a stop signal while it "
            "was in flight: do not call again through this gateway, every new call is "
            "refused (gateway_stopping). Re-plan from the values below once a gateway runs "
            "again, or report it.")
"""The refusal text of a gate refusal while the gateway stops (:func:`refusal`)."""


def _version(rec: Any, version_of: Any) -> dict[str, Any]:
    """A version handed over, numbered as its text says (the key's version, else seq)."""
    n = version_of(rec) if version_of else None
    return {"record": rec.id, "version": n} if n is not None else \
        {"record": rec.id, "seq": rec.seq}


def error_result(text: str, meta: dict[str, Any] | None = None) -> Any:
    """A ``CallToolResult`` with ``isError`` set: one text block ``text``, ``_meta`` ``meta``.

    What the gateway answers its client for a call it refused, did not forward or whose
    upstream failed (planfence Sec. 4: the refusal is the model's fresh context).
    """
    from mcp_types import CallToolResult, TextContent
    return CallToolResult(content=[TextContent(type="text", text=text)], is_error=True,
                          _meta=meta)
