"""An upstream's requests to the client, forwarded to the session whose call raised them.

An upstream tool may ask the client's human for input (``elicitation/create``: an
approval, a missing value), the client's model for a completion
(``sampling/createMessage``) or the client's roots (``roots/list``: the directories it
may work in) while it runs a ``tools/call``. The gateway's connection to an upstream is
shared by all its client sessions, so such a request goes to the session whose call is
in flight there (#29):

* over HTTP (and the lean path) the upstream sends it on that call's own response
  stream; the SDK hands it to the gateway's callback in the context of the task that
  sent the call, so :data:`CALLER` (set around each forwarded ``tools/call``,
  :meth:`Asks.calling`) names the call exactly;
* over stdio the line carries no such link: the call is the one in flight on that
  upstream, or any of several when they all come from one client session (a stdio
  client always is one); calls of several sessions in flight there at once cannot be
  told apart, and the request is answered with an error saying so (never guessed);
* a ``roots/list`` outside any call (an upstream refreshing its roots after
  ``notifications/roots/list_changed``) goes to the gateway's one client over stdio
  (:attr:`Asks.sole`); over HTTP it has no session to go to and is refused, saying so.

The client's answer is the upstream's answer. A client that cannot receive the request
(:func:`~icore.mcp._client_reach.cannot_receive`: no such capability declared, no
channel, an HTTP session with no GET stream open) is not asked: the upstream gets a
JSON-RPC error at once (``-32601``, "Elicitation not supported by the client: <why>").
Each question waits at most the manifest's ``ask_timeout_s`` (default 300) for its
answer, and the upstream call's own ``timeout_s`` does not run meanwhile (the upstream
waits on the human, it does not work); a client session that closes while asked fails
the question at once, so the upstream's call ends. The question and the answer go to
the trace, the answer with the ``task`` of the call that asked (when known exactly): a
human's answer to a protected call as the recorders write approvals (``answered_by:
"human"``, a ``decision``, the tool and its arguments), so ``icore audit`` shows that
action approved or rejected by a human.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
import math
from collections.abc import Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

import anyio

from icore.mcp._client_reach import (
    FIRST_GET_GRACE_S,
    NO_GET_STREAM,
    GetStreams,
    cannot_receive,
    not_receivable,
    session_id,
)
from icore.mcp._gateway_urls import UrlElicitations

if TYPE_CHECKING:
    from icore.mcp._session_log import GatewayTrace

log = logging.getLogger("icore.mcp")


class Caller:
    """One forwarded ``tools/call`` in flight: whom its upstream's questions go to.

    Attributes:
        ctx: the client request's context (the gateway's server side: its session).
        sid: the client session's id in the trace.
        tool: the tool's name as the client called it.
        args: the call's arguments.
        protected: whether the tool is protected (a human's answer is then recorded as
            an approval or a rejection of the action).
        upstream: the upstream's name.
        gone: set when the client's request ended (HTTP: its connection closed, or its
            answer sent; :data:`CLIENT_GONE`): a question then fails at once. None:
            never (stdio: a client gone stops the gateway).
        scope: the cancel scope bounding the call at its upstream (its ``timeout_s``),
            paused while a question waits (:meth:`paused`); None until the call is sent.
        task: the call's ``task`` in the trace (``<session>/<n>``): an answer's line
            names it, so the audit links the answer to exactly this call. None: none
            (a question outside any call).
        asked: the kinds of question its upstream asked while it was in flight (the
            call's, or one of its session's calls there when they cannot be told
            apart): its upstream was running it, so a JSON-RPC error that ends it no
            longer means it did not run.
    """

    def __init__(self, ctx: Any, sid: str, tool: str, args: Mapping[str, Any],
                 protected: bool, upstream: str, gone: ClientLink | None = None,
                 task: str | None = None) -> None:
        self.ctx, self.sid, self.tool, self.args = ctx, sid, tool, args
        self.protected, self.upstream, self.gone = protected, upstream, gone
        self.task = task
        self.asked: set[str] = set()
        self.scope: anyio.CancelScope | None = None
        self._pauses = 0
        self._left = 0.0

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        """The call's deadline stopped while its upstream waits for an answer."""
        scope = self.scope
        if scope is None:
            yield
            return
        if self._pauses == 0:
            self._left = scope.deadline - anyio.current_time()
            scope.deadline = math.inf
        self._pauses += 1
        try:
            yield
        finally:
            self._pauses -= 1
            if self._pauses == 0:
                scope.deadline = anyio.current_time() + max(self._left, 0.0)


CALLER: contextvars.ContextVar[Caller | None] = contextvars.ContextVar(
    "icore_mcp_caller", default=None)
"""The forwarded ``tools/call`` the current task (or the one that sent it) serves."""


class ClientLink:
    """An HTTP request's client connection: whether it is gone, asked only when needed.

    Args:
        receive: the request's ASGI ``receive`` (its body already read): it answers
            ``http.disconnect`` once the client is gone (or the response was sent).
    """

    def __init__(self, receive: Any) -> None:
        self._receive = receive
        self._gone = False

    def is_set(self) -> bool:
        """Whether the client was seen gone."""
        return self._gone

    async def gone_now(self) -> bool:
        """Whether the client is gone, asked now without waiting (its POST still open).

        One ``receive()`` given no time: ``http.disconnect`` when the connection closed.
        """
        if not self._gone:
            with anyio.move_on_after(0):
                if (await self._receive()).get("type") == "http.disconnect":
                    self._gone = True
        return self._gone

    async def wait(self) -> None:
        """Until the client is gone (no task runs for it otherwise: #25's per-call cost)."""
        while not self._gone:
            if (await self._receive()).get("type") == "http.disconnect":
                self._gone = True


CLIENT_GONE: contextvars.ContextVar[ClientLink | None] = contextvars.ContextVar(
    "icore_mcp_client_gone", default=None)
"""Set by the HTTP front (:class:`~icore.mcp._http_shape.MessageShape`) for a request's
handler: its client connection (:class:`ClientLink`)."""


def note_scope(scope: anyio.CancelScope) -> None:
    """Remember ``scope`` (an upstream request's timeout) as the current call's."""
    caller = CALLER.get()
    if caller is not None:
        caller.scope = scope


class Asks:
    """The gateway's side of its upstreams' questions (one per gateway).

    Args:
        trace: the gateway's trace (each question and answer).
        timeout_s: longest wait for a client's answer to one question, seconds (the
            manifest's ``ask_timeout_s``).
    """

    def __init__(self, trace: GatewayTrace, timeout_s: float = 300.0) -> None:
        self.trace = trace
        self.timeout_s = timeout_s
        self._inflight: dict[str, list[Caller]] = {}
        self.urls = UrlElicitations(trace)
        """Where each forwarded URL elicitation went (its completion follows it)."""
        self.streams: GetStreams | None = None
        """HTTP: the sessions' open GET streams (set by the HTTP front); None: stdio."""
        self.sole: tuple[Any, str] | None = None
        """Stdio: ``(a request context, session id)`` of the gateway's one client (its
        latest request), where a ``roots/list`` outside any call goes; None: HTTP, or
        no request yet."""

    @contextlib.contextmanager
    def calling(self, caller: Caller) -> Iterator[None]:
        """``caller`` in flight at its upstream (and the current task's :data:`CALLER`)."""
        token = CALLER.set(caller)
        calls = self._inflight.setdefault(caller.upstream, [])
        calls.append(caller)
        try:
            yield
        finally:
            calls.remove(caller)
            CALLER.reset(token)

    def callbacks(self, upstream: str) -> dict[str, Any]:
        """The SDK ``ClientSession`` callbacks of ``upstream``'s connection."""
        async def elicit(context: Any, params: Any) -> Any:
            return await self.ask(upstream, "elicitation", params)

        async def sample(context: Any, params: Any) -> Any:
            return await self.ask(upstream, "sampling", params)

        async def roots(context: Any) -> Any:
            return await self.ask(upstream, "roots", None)

        return {"elicitation_callback": elicit, "sampling_callback": sample,
                "list_roots_callback": roots}

    def listen_roots(self, server: Any, host: Any) -> None:
        """Serve ``notifications/roots/list_changed`` at ``host``'s SDK ``server``.

        ``host``: the gateway (its sessions, upstreams, stdio or not); see
        :meth:`roots_changed`.
        """
        from mcp_types import NotificationParams

        async def changed(ctx: Any, params: Any) -> None:
            await self.roots_changed(host.view(ctx).sid, host.upstreams.values(),
                                     host.single_client)
        server.add_notification_handler("notifications/roots/list_changed",
                                        NotificationParams, changed)

    async def roots_changed(self, sid: str, upstreams: Iterable[Any], stdio: bool) -> None:
        """Session ``sid``'s ``notifications/roots/list_changed``: to every live upstream.

        Stdio only (``stdio``): the one client's roots are the upstreams' roots; an
        upstream then asks ``roots/list`` again, which goes to that client
        (:attr:`sole`). Over HTTP the upstream connections are shared by every session,
        whose roots differ: not passed on (an upstream asks each call's own session
        within the call). Best effort, as notifications are; traced.
        """
        import mcp_types as types
        if not stdio:
            self.trace.note(sid, "the client's roots changed (not passed to the upstreams: "
                            "their connections are shared by every HTTP session)")
            return
        sent = []
        for u in upstreams:
            if u.session is None or not u.alive():
                continue
            with contextlib.suppress(Exception):
                await u.session.send_notification(types.RootsListChangedNotification())
                sent.append(u.name)
        self.trace.note(sid, "the client's roots changed; passed to upstream(s) "
                        + (", ".join(sent) or "none (none connected)"))

    def _caller(self, upstream: str, kind: str, params: Any = None
                ) -> tuple[Caller | None, bool, str]:
        """``(caller, exact, why none)`` of a ``kind`` question ``upstream`` asks now.

        ``exact``: the one call that asked is known (else one of one session's calls).
        A ``roots/list`` outside any call goes to the stdio client (:attr:`sole`; its
        caller has no ``tool`` nor ``task``). A question with no link to its call while
        calls of several sessions are in flight goes to the one session among them that
        can answer it (:func:`able`), if only one can; else none (ambiguous).
        """
        c = CALLER.get()
        if c is not None and c.upstream == upstream:
            return c, True, ""
        calls = list(self._inflight.get(upstream, ()))
        if len(calls) == 1:
            return calls[0], True, ""
        if calls and len({x.sid for x in calls}) == 1:
            return calls[0], False, ""
        fit = [x for x in calls if able(x, kind, params, self.streams)]
        if calls and len({x.sid for x in fit}) == 1:
            return fit[0], False, ""  # the others' clients could not answer it at all
        if not calls:
            if kind == "roots" and self.sole is not None:  # stdio: its one client's
                return Caller(self.sole[0], self.sole[1], "", {}, False, upstream), \
                    True, ""
            return None, False, f"no call of a client is in flight at upstream {upstream}"
        return None, False, (f"{len(calls)} calls of {len({x.sid for x in fit})}"
                             f" client sessions that can answer {kind} are in flight at "
                             f"upstream {upstream} and its request carries no link to one "
                             "(a stdio line, or an HTTP upstream's request sent on its GET "
                             "stream), so the gateway cannot tell which one asked")

    async def ask(self, upstream: str, kind: str, params: Any) -> Any:
        """Forward ``params`` (a ``kind`` question of ``upstream``) to its caller's client.

        Returns the client's result, or ``ErrorData`` (never raises): no caller found, a
        client that cannot receive it (at once:
        :func:`~icore.mcp._client_reach.not_receivable`), no answer within
        :attr:`timeout_s`, the client's own error or its session gone.
        """
        import mcp_types as types
        caller, exact, why = self._caller(upstream, kind, params)
        if caller is None:
            for x in self._inflight.get(upstream, ()):  # one of them asked: each may run
                x.asked.add(kind)
            log.warning("upstream %s asked for %s: %s", upstream, kind, why)
            self.trace.note("gateway", f"upstream {upstream} asked for {kind}; not "
                            f"forwarded: {why}", ask={"kind": kind, "upstream": upstream,
                                                      "error": why})
            return types.ErrorData(code=types.INVALID_REQUEST,
                                   message=f"{kind} not forwarded: {why}")
        anyone = [caller] if exact else list(self._inflight.get(upstream, ()))
        for x in anyone:  # its upstream runs it (or one of these: each may have run)
            x.asked.add(kind)
        tool = caller.tool if exact else " or ".join(sorted(
            {x.tool for x in anyone if x.sid == caller.sid}))
        message = getattr(params, "message", None)
        asked: dict[str, Any] = {"kind": kind, "upstream": upstream, "tool": tool}
        if exact and caller.task is not None:
            asked["task"] = caller.task
        if kind == "elicitation":
            asked["message"] = message
            asked["mode"] = getattr(params, "mode", "form")
        self.trace.note(caller.sid, f"upstream {upstream} asks the client ({kind}) " +
                        (f"during {tool}" if tool else "outside any call") +
                        (f": {message}" if message else ""), ask=asked)
        unfit = cannot_receive(caller.ctx.session, kind, params, self.streams)
        sid = session_id(caller.ctx.session)
        if unfit == NO_GET_STREAM and self.streams is not None and sid is not None:
            with caller.paused():  # its first GET stream may be on its way
                if await self.streams.first_open(sid, min(FIRST_GET_GRACE_S,
                                                          self.timeout_s)):
                    unfit = cannot_receive(caller.ctx.session, kind, params, self.streams)
        if unfit is not None:
            error = not_receivable(kind, unfit)
            self.trace.note(caller.sid, f"the client cannot be asked ({kind}): {unfit}; the "
                            "upstream is answered at once", ask={**asked, "error": error.message})
            return error
        try:
            with caller.paused():
                result = await _unless_gone(caller, _send(caller, kind, params,
                                                          self.timeout_s))
        except Exception as exc:  # the client's error, no answer in time, session gone
            text = _failure(exc, self.timeout_s, kind)
            head = "an unreadable answer" if text.startswith("the client's answer") \
                else "no answer"
            self.trace.note(caller.sid, f"{head} from the client to {kind} " +
                            (f"during {tool}" if tool else "outside any call") +
                            f": {text}", ask={**asked, "error": text})
            code = getattr(getattr(exc, "error", None), "code", None)
            return types.ErrorData(code=code if isinstance(code, int)
                                   else types.INTERNAL_ERROR, message=text)
        if kind == "elicitation" and getattr(params, "mode", None) == "url":
            self.urls.sent(upstream, getattr(params, "elicitation_id", None),
                           caller.ctx.session, caller.sid)
        schema = getattr(params, "requested_schema", None)
        schema = schema if isinstance(schema, Mapping) else None
        if kind == "elicitation" and any(x.protected for x in anyone) and \
                (unfit := misfit(result, schema)) is not None:
            # fail closed: the upstream's own parser may read "yes" as true and act
            text = (f"the human's answer does not fit the requested form ({unfit}); not "
                    "passed to the upstream of a protected call (fail closed)")
            said = ({"answered_by": "human", "decision": "reject", "tool": caller.tool,
                     "args": dict(caller.args)} if exact and caller.protected and
                    caller.task is not None else {})  # the audit: rejected (qa-new15b)
            self.trace.note(caller.sid, f"an unfitting answer from the client to {kind} "
                            f"during {tool}: {text}", ask={
                                **asked, "error": text, "action": result.action,
                                "content": _bounded(result.content), "decision": "reject"},
                            **({"task": caller.task, **said} if said else {}))
            return types.ErrorData(code=types.INVALID_PARAMS, message=text)
        self._answered(caller, exact, kind, asked, result, schema)
        return result

    def _answered(self, caller: Caller, exact: bool, kind: str, asked: dict[str, Any],
                  result: Any, schema: Mapping[str, Any] | None = None) -> None:
        """Record the client's answer (a human's approval or rejection of a protected call)."""
        import json
        task = {"task": caller.task} if exact and caller.task is not None else {}
        if kind == "roots":
            uris = [str(getattr(r, "uri", "")) for r in getattr(result, "roots", ())]
            self.trace.note(caller.sid, f"the client listed {len(uris)} root(s) for "
                            f"{asked['tool'] or asked['upstream']}" +
                            (f": {', '.join(uris)[:500]}" if uris else ""),
                            ask={**asked, "roots": uris[:100]}, **task)
            return
        if kind == "sampling":
            content = getattr(result, "content", None)
            said = getattr(content, "text", None)
            self.trace.note(caller.sid, f"the client's model answered {asked['tool']}'s "
                            f"sampling request ({getattr(result, 'model', '?')})" +
                            (f": {said[:500]}" if isinstance(said, str) else ""),
                            ask={**asked, "model": getattr(result, "model", None)}, **task)
            return
        action, content = result.action, result.content
        decision = human_decision(action, content, schema)
        shown = _bounded(content)
        unfit = misfit(result, schema)  # an unprotected call's answer is passed on as is
        fields: dict[str, Any] = {"ask": {**asked, "action": action, "content": shown,
                                          "decision": decision,
                                          **({"misfit": unfit} if unfit else {})}, **task}
        if exact and caller.protected and decision != ANSWERED:  # the recorders' form
            fields.update(answered_by="human", decision=decision, tool=caller.tool,
                          args=dict(caller.args))
        text = json.dumps(shown, ensure_ascii=False, default=str) \
            if content is not None else ""
        said = decision if decision != ANSWERED else "answered, neither approved nor rejected"
        said += f"; it does not fit the requested form: {unfit}" if unfit else ""
        self.trace.note(caller.sid, f"a human answered {action} ({said}) to "
                        f"{asked['tool']}'s question" + (f": {text}" if text else ""),
                        **fields)


def able(caller: Caller, kind: str, params: Any, streams: GetStreams | None) -> bool:
    """Whether ``caller``'s client can answer a ``kind`` question now.

    Its request still open (HTTP: its connection not gone), the capability declared and
    a channel to send it on (:func:`~icore.mcp._client_reach.cannot_receive`; an HTTP
    session whose first GET stream is not open yet counts as unable).
    """
    if caller.gone is not None and caller.gone.is_set():
        return False
    return cannot_receive(caller.ctx.session, kind, params, streams) is None


ANSWERED = "answered"
"""A human's answer that is neither an approval nor a rejection (:func:`human_decision`)."""

CONTENT_CAP = 500
"""Most characters of a human's answer the trace holds (its JSON text, cut beyond)."""

_TYPES: dict[str, tuple[type, ...]] = {"boolean": (bool,), "string": (str,),
                                       "integer": (int,), "number": (int, float),
                                       "array": (list,)}


def human_decision(action: str, content: Mapping[str, Any] | None,
                   schema: Mapping[str, Any] | None = None) -> str:
    """A human's answer to an elicitation: ``approve``, ``reject`` or :data:`ANSWERED`.

    Fail closed (QA qa-new11 S2): ``decline`` and ``cancel`` reject; any boolean field
    the requested ``schema`` declares answered ``false`` rejects; ``accept`` approves only
    when every boolean field the schema declares is answered ``true`` and the content
    fits the schema (its properties' types, enums, required fields, no others). Content
    that does not fit, a form with no boolean field (free input, not a yes/no), or no
    schema at all: :data:`ANSWERED`, neither approved nor rejected.
    """
    if action != "accept":
        return "reject"
    props = (schema or {}).get("properties")
    if not isinstance(props, Mapping) or not isinstance(content, Mapping):
        return ANSWERED
    flags = [k for k, v in props.items()
             if isinstance(v, Mapping) and v.get("type") == "boolean"]
    if any(content.get(k) is False for k in flags):
        return "reject"
    if not flags or not _fits(content, props, (schema or {}).get("required")):
        return ANSWERED
    return "approve" if all(content.get(k) is True for k in flags) else ANSWERED


def misfit(result: Any, schema: Mapping[str, Any] | None) -> str | None:
    """Why an accepted elicitation answer does not fit its form ``schema``, else None.

    None too when the answer is no ``accept`` (nothing to act on) or the form declares no
    properties (nothing to fit).
    """
    props = (schema or {}).get("properties")
    if getattr(result, "action", None) != "accept" or not isinstance(props, Mapping):
        return None
    content = getattr(result, "content", None)
    if not isinstance(content, Mapping):
        return "no content"
    if _fits(content, props, (schema or {}).get("required")):
        return None
    wrong = sorted(str(k) for k in content if not isinstance(props.get(k), Mapping) or
                   not _fits({k: content[k]}, props, None))
    missing = [k for k in (schema or {}).get("required") or () if k not in content]
    return "; ".join(filter(None, [
        f"field(s) {', '.join(wrong)[:200]} not of the form's type or values" if wrong
        else "", f"required field(s) {', '.join(map(str, missing))[:200]} missing"
        if missing else ""])) or "it does not fit"


def _fits(content: Mapping[str, Any], props: Mapping[str, Any], required: Any) -> bool:
    """Whether ``content`` fits an elicitation form's ``props`` (and ``required``)."""
    if isinstance(required, list) and any(k not in content for k in required):
        return False
    for key, value in content.items():
        prop = props.get(key)
        if not isinstance(prop, Mapping):
            return False
        kinds = _TYPES.get(str(prop.get("type")))
        if kinds is None or not isinstance(value, kinds) or \
                (isinstance(value, bool) and prop.get("type") != "boolean"):
            return False
        enum = prop.get("enum")
        if isinstance(enum, list) and not isinstance(value, list) and value not in enum:
            return False
    return True


def _bounded(content: Any) -> Any:
    """A human's answer as the trace holds it: itself, or its JSON text cut at the cap."""
    import json
    if content is None:
        return None
    text = json.dumps(content, ensure_ascii=False, default=str)
    return content if len(text) <= CONTENT_CAP else text[:CONTENT_CAP] + "…"


async def _send(caller: Caller, kind: str, params: Any, timeout_s: float) -> Any:
    """The request to the caller's client; its result.

    On its call's own channel (stdio; an SSE answer), else on the connection's own (the
    gateway answers HTTP POSTs with JSON, which carries only the response: the question
    goes on the client's GET stream, as the SDK's client opens one).
    """
    import mcp_types as types
    from mcp.shared.message import ServerMessageMetadata
    meta = ServerMessageMetadata(related_request_id=caller.ctx.request_id) \
        if caller.ctx.session.can_send_request and caller.tool else None
    if kind == "roots":
        return await caller.ctx.session.send_request(
            types.ListRootsRequest(), types.ListRootsResult,
            request_read_timeout_seconds=timeout_s, metadata=meta)
    if kind == "elicitation":
        return await caller.ctx.session.send_request(
            types.ElicitRequest(params=params), types.ElicitResult,
            request_read_timeout_seconds=timeout_s, metadata=meta)
    result_type = types.CreateMessageResultWithTools if getattr(params, "tools", None) \
        else types.CreateMessageResult
    return await caller.ctx.session.send_request(
        types.CreateMessageRequest(params=params), result_type,
        request_read_timeout_seconds=timeout_s, metadata=meta)


class ClientGone(Exception):
    """The asked client abandoned its request (its connection closed) before answering."""


async def _unless_gone(caller: Caller, asking: Any) -> Any:
    """Await ``asking``; raise :class:`ClientGone` as soon as the caller's client is gone."""
    gone = caller.gone
    if gone is None:
        return await asking
    if gone.is_set():
        asking.close()
        raise ClientGone("the client's request was abandoned (its connection closed)")
    got: list[Any] = []
    failed: list[BaseException] = []
    async with anyio.create_task_group() as tg:
        async def answer() -> None:
            try:
                got.append(await asking)
            except Exception as exc:  # the client's error: raised below, not in a group
                failed.append(exc)
            tg.cancel_scope.cancel()

        async def closed() -> None:
            await gone.wait()
            tg.cancel_scope.cancel()

        tg.start_soon(answer)
        tg.start_soon(closed)
    if failed:
        raise failed[0]
    if not got:
        raise ClientGone("the client's request was abandoned (its connection closed) "
                         "before it answered")
    return got[0]


_RESULTS = {"elicitation": ("elicitation/create", "ElicitResult"),
            "sampling": ("sampling/createMessage", "CreateMessageResult"),
            "roots": ("roots/list", "ListRootsResult")}
"""Each question's method and the result type its answer must fit."""


def _failure(exc: BaseException, timeout_s: float, kind: str = "elicitation") -> str:
    """What a question's failure says (the client's error, a timeout, a closed session).

    A result that does not fit the question's result type (pydantic's error: the SDK
    validates it) is named by its first error, never pydantic's whole dump.
    """
    errors = getattr(exc, "errors", None)
    if callable(errors) and not hasattr(exc, "error"):
        method, model = _RESULTS.get(kind, (kind, "result"))
        try:
            first: Any = errors()[0]
            loc = ".".join(str(p) for p in first.get("loc", ())) or "the result"
            return (f"the client's answer to {method} does not fit {model}: {loc}: "
                    f"{first.get('msg')}")[:300]
        except Exception:  # not pydantic's: its text below
            pass
    text = getattr(exc, "message", None) or str(exc) or type(exc).__name__
    if isinstance(exc, TimeoutError) or "timed out" in text.lower():
        return f"the client did not answer within {timeout_s:g} s"
    return text[:300]
