"""The lean ``tools/call`` path to an HTTP upstream (#25 item 7), against a real socket.

A scripted HTTP/1.1 server on 127.0.0.1 answers each request as a test says (JSON, SSE
in any chunking, 404, a redirect, a dropped or hung connection); the gateway side is
:class:`~icore.mcp._upstream_lean.LeanCalls` over :class:`~icore.mcp._lean_http.LeanHttp`,
as the gateway builds them. The end-to-end path (a real SDK upstream, a real gateway, its
client) is in ``test_gateway_lean.py``.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from icore.mcp._lean_http import LeanHttp, lean_origin
from icore.mcp._upstream import TRANSPORT_FAILED, TRANSPORT_FAILED_TEXT
from icore.mcp._upstream_lean import (
    MID_STREAM,
    NOT_TAKEN,
    LeanCalls,
    not_taken,
    not_taken_error,
)

pytest.importorskip("mcp")
pytest.importorskip("httptools")

from mcp.shared.exceptions import MCPError

Reply = Callable[[dict[str, Any], asyncio.StreamWriter], Awaitable[None]]
RESULT = {"content": [{"type": "text", "text": "ok"}], "isError": False}


class Session:
    """What LeanCalls reads of the SDK's session; records the cancellation notices."""

    protocol_version = "2025-11-25"
    discover_result = None

    def __init__(self) -> None:
        self.notes: list[Any] = []

    async def send_notification(self, note: Any) -> None:
        self.notes.append(note)


class Transport:
    session_id = "sid-1"


@asynccontextmanager
async def server(reply: Reply) -> AsyncIterator[tuple[int, list[dict[str, Any]]]]:
    """A server answering each request with ``reply(request, writer)``; yields its port
    and the requests seen (``method``, ``headers``, ``body``, ``peer``)."""
    seen: list[dict[str, Any]] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.decode("latin-1").split("\r\n")
                method = lines[0].split(" ")[0]
                headers = {k.lower(): v.strip() for k, _, v in
                           (x.partition(":") for x in lines[1:] if x)}
                body = await reader.readexactly(int(headers.get("content-length", "0")))
                req = {"method": method, "target": lines[0].split(" ")[1],
                       "headers": headers, "peer":
                       writer.get_extra_info("peername")[1],
                       "body": json.loads(body) if body else None}
                seen.append(req)
                await reply(req, writer)
                if writer.is_closing():
                    return
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    srv = await asyncio.start_server(handle, "127.0.0.1", 0)
    try:
        yield srv.sockets[0].getsockname()[1], seen
    finally:
        srv.close()


def head(status: int, ctype: str | None, extra: str = "", length: int | None = None) -> bytes:
    lines = [f"HTTP/1.1 {status} X"]
    if ctype:
        lines.append(f"content-type: {ctype}")
    lines.append(f"content-length: {length}" if length is not None
                 else "transfer-encoding: chunked")
    return ("\r\n".join(lines) + extra + "\r\n\r\n").encode()


def chunk(data: bytes) -> bytes:
    return f"{len(data):x}\r\n".encode() + data + b"\r\n"


def response(rid: Any, result: Any = None, error: Any = None) -> bytes:
    msg: dict[str, Any] = {"jsonrpc": "2.0", "id": rid}
    msg.update({"error": error} if error is not None else {"result": result or RESULT})
    return json.dumps(msg).encode()


async def write_cut(w: asyncio.StreamWriter, stream: bytes, cuts: list[int]) -> None:
    """An SSE answer's head, then ``stream`` in chunks cut at ``cuts``, then its end."""
    w.write(head(200, "text/event-stream"))
    at = 0
    for c in sorted(set(cuts)):
        if at < c < len(stream):
            w.write(chunk(stream[at:c]))
            await w.drain()
            await asyncio.sleep(0)
            at = c
    w.write(chunk(stream[at:]) + b"0\r\n\r\n")


async def call_ok(calls: LeanCalls, s: Session, seen: list[dict[str, Any]]) -> None:
    """One call of ``echo``: its result is no error."""
    out = await calls.call(s, "echo", {}, None)
    assert out["isError"] is False


def lean(port: int, injected: list[Any], lost: list[bool], spawned: list[Any]) -> LeanCalls:
    origin = lean_origin(f"http://127.0.0.1:{port}/mcp")
    assert origin is not None
    http = LeanHttp(*origin, {"authorization": "Bearer t"}, keepalive_s=2.0, drain_s=1.0)

    async def inject(msg: Any) -> None:
        injected.append(msg)

    return LeanCalls(http, Transport(), inject, lambda: lost.append(True),
                     (TRANSPORT_FAILED, TRANSPORT_FAILED_TEXT),
                     lambda fn: spawned.append(fn))


def run(reply: Reply, body: Callable[[LeanCalls, Session, list[dict[str, Any]]],
                                     Awaitable[None]], port_out: list[int] | None = None
        ) -> tuple[list[Any], list[bool], list[Any]]:
    injected: list[Any] = []
    lost: list[bool] = []
    spawned: list[Any] = []

    async def main() -> None:
        async with server(reply) as (port, seen):
            if port_out is not None:
                port_out.append(port)
            calls = lean(port, injected, lost, spawned)
            await body(calls, Session(), seen)
            calls.http.close()

    anyio.run(main)
    return injected, lost, spawned


def test_json_answer_one_kept_alive_connection_and_the_sdk_headers() -> None:
    async def reply(req: dict[str, Any], w: asyncio.StreamWriter) -> None:
        data = response(req["body"]["id"])
        w.write(head(200, "application/json", length=len(data)) + data)

    async def body(calls: LeanCalls, s: Session, seen: list[dict[str, Any]]) -> None:
        for i in range(5):
            out = await calls.call(s, "echo", {"n": i}, {"traceparent": "00-a-b-01"})
            assert out["content"][0]["text"] == "ok"
        assert len({r["peer"] for r in seen}) == 1  # one pooled connection
        h = seen[0]["headers"]
        assert h["mcp-session-id"] == "sid-1" and h["mcp-protocol-version"] == "2025-11-25"
        assert h["accept"] == "application/json, text/event-stream"
        assert h["authorization"] == "Bearer t"  # the manifest's headers
        assert seen[0]["body"]["method"] == "tools/call"
        assert seen[0]["body"]["params"] == {"name": "echo", "arguments": {"n": 0},
                                             "_meta": {"traceparent": "00-a-b-01"}}

    run(reply, body)


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cuts=st.lists(st.integers(min_value=1, max_value=400), max_size=8),
       crlf=st.booleans())
def test_sse_answer_in_any_chunking_notification_first(cuts: list[int], crlf: bool) -> None:
    """An SSE answer whose first event is a notification: it goes to the SDK's session,
    then the response is the result, however the stream is cut (even inside "\\r\\n")."""
    nl = b"\r\n" if crlf else b"\n"

    async def reply(req: dict[str, Any], w: asyncio.StreamWriter) -> None:
        note = json.dumps({"jsonrpc": "2.0", "method": "notifications/message",
                           "params": {"level": "info", "data": "working"}}).encode()
        stream = (b"event: message" + nl + b"data: " + note + nl + nl + b": comment" + nl
                  + nl + b"event: message" + nl + b"data: " + response(req["body"]["id"])
                  + nl + nl)
        await write_cut(w, stream, cuts)

    injected, _, _ = run(reply, call_ok)
    assert [m.message.method for m in injected] == ["notifications/message"]


@settings(max_examples=25, deadline=None)
@given(cuts=st.lists(st.integers(min_value=1, max_value=12), max_size=4),
       bom=st.booleans())
def test_a_leading_bom_is_dropped_however_the_stream_is_cut(cuts: list[int],
                                                            bom: bool) -> None:
    """An SSE stream may start with a UTF-8 BOM (#25): dropped, even split over chunks
    (it used to hide the first line: here the response's ``data:``)."""
    async def reply(req: dict[str, Any], w: asyncio.StreamWriter) -> None:
        stream = (b"\xef\xbb\xbf" if bom else b"") + b"data: " + response(
            req["body"]["id"]) + b"\n\n"
        await write_cut(w, stream, cuts)

    run(reply, call_ok)


def test_a_connection_lost_mid_answer_fails_once_saying_it_may_have_run() -> None:
    async def reply(req: dict[str, Any], w: asyncio.StreamWriter) -> None:
        w.write(head(200, "text/event-stream") + chunk(b": begun\n\n"))
        await w.drain()
        w.close()

    async def body(calls: LeanCalls, s: Session, seen: list[dict[str, Any]]) -> None:
        with pytest.raises(MCPError) as err:
            await calls.call(s, "echo", {}, None)
        said = err.value.message
        assert said.startswith(TRANSPORT_FAILED_TEXT) and said.endswith(MID_STREAM), said
        assert len(seen) == 1  # never sent again

    run(reply, body)


def test_404_to_the_session_marks_it_lost() -> None:
    async def reply(req: dict[str, Any], w: asyncio.StreamWriter) -> None:
        w.write(head(404, "text/plain", length=9) + b"not found")

    async def body(calls: LeanCalls, s: Session, seen: list[dict[str, Any]]) -> None:
        with pytest.raises(MCPError) as err:
            await calls.call(s, "echo", {}, None)
        assert err.value.message == "Session terminated"

    _, lost, spawned = run(reply, body)
    assert lost == [True] and not spawned  # answered: nothing to cancel


def test_an_error_status_with_a_jsonrpc_body_is_that_error() -> None:
    async def reply(req: dict[str, Any], w: asyncio.StreamWriter) -> None:
        data = response(None, error={"code": -32602, "message": "bad arguments"})
        w.write(head(400, "application/json", length=len(data)) + data)

    async def body(calls: LeanCalls, s: Session, seen: list[dict[str, Any]]) -> None:
        with pytest.raises(MCPError) as err:
            await calls.call(s, "echo", {}, None)
        # the upstream's own error, with the status it came at (#29)
        assert (err.value.code, err.value.message) == (-32602, "bad arguments (HTTP 400)")

    run(reply, body)


def test_a_dropped_connection_fails_that_call_only() -> None:
    """The upstream drops the connection mid-answer: that call's error (TRANSPORT_FAILED,
    not the session's), and the next call goes out on a fresh connection."""
    async def reply(req: dict[str, Any], w: asyncio.StreamWriter) -> None:
        if req["body"]["params"]["name"] == "drop":
            w.write(head(200, "text/event-stream") + chunk(b"event: mess"))
            await w.drain()
            w.transport.abort()
            return
        data = response(req["body"]["id"])
        w.write(head(200, "application/json", length=len(data)) + data)

    async def body(calls: LeanCalls, s: Session, seen: list[dict[str, Any]]) -> None:
        with pytest.raises(MCPError) as err:
            await calls.call(s, "drop", {}, None)
        assert err.value.code == TRANSPORT_FAILED
        assert err.value.message.startswith(TRANSPORT_FAILED_TEXT)
        assert (await calls.call(s, "echo", {}, None))["isError"] is False
        assert seen[0]["peer"] != seen[1]["peer"]

    run(reply, body)


def test_a_hung_call_is_abandoned_closed_and_cancelled_upstream() -> None:
    async def reply(req: dict[str, Any], w: asyncio.StreamWriter) -> None:
        if req["body"]["params"]["name"] == "hang":
            w.write(head(200, "text/event-stream"))
            await asyncio.sleep(30)
            return
        data = response(req["body"]["id"])
        w.write(head(200, "application/json", length=len(data)) + data)

    async def body(calls: LeanCalls, s: Session, seen: list[dict[str, Any]]) -> None:
        with pytest.raises(TimeoutError), anyio.fail_after(0.3):
            await calls.call(s, "hang", {}, None)
        assert not calls.http.idle  # its connection was closed, not pooled
        assert (await calls.call(s, "echo", {}, None))["isError"] is False

    _, _, spawned = run(reply, body)
    assert len(spawned) == 1  # the upstream is told (next test: what)


def test_the_cancellation_notice_names_the_call() -> None:
    spawned: list[Any] = []
    calls = LeanCalls(LeanHttp("127.0.0.1", 9, "/", {}, keepalive_s=1, drain_s=1),
                      Transport(), lambda m: None, lambda: None, (1, "x"), spawned.append)
    s = Session()
    calls._abandoned(s, "icore-7")
    anyio.run(spawned[0])
    sent = s.notes
    assert len(sent) == 1 and sent[0].method == "notifications/cancelled"
    assert sent[0].params.request_id == "icore-7"


@pytest.mark.parametrize("status", [301, 302, 303])
def test_a_redirect_is_that_calls_error_never_resent(status: int) -> None:
    """A 303 may come after the server ran the call: it is not followed or resent."""
    async def reply(req: dict[str, Any], w: asyncio.StreamWriter) -> None:
        w.write(head(status, None, "\r\nlocation: /mcp/", length=0))

    async def body(calls: LeanCalls, s: Session, seen: list[dict[str, Any]]) -> None:
        with pytest.raises(MCPError) as err:
            await calls.call(s, "echo", {}, None)
        assert err.value.message.startswith("Redirect to /mcp/ not followed"), \
            err.value.message
        assert f"HTTP {status} to a POST" in err.value.message
        assert not not_taken(err.value) and len(seen) == 1

    run(reply, body)


@pytest.mark.parametrize("status", [307, 308])
@pytest.mark.parametrize("location", ["/mcp/", "http://127.0.0.1:{port}/mcp/?x=1"])
def test_a_same_origin_307_or_308_is_followed_once(status: int, location: str) -> None:
    """The server did not take the POST: the same request goes to the new target (#25)."""
    port: list[int] = []

    async def reply(req: dict[str, Any], w: asyncio.StreamWriter) -> None:
        if req["target"] == "/mcp":
            w.write(head(status, None, "\r\nlocation: " + location.format(port=port[0]),
                         length=0))
        else:
            w.write(head(200, "application/json") + chunk(response(req["body"]["id"], {
                "content": [{"type": "text", "text": req["target"]}]})) + chunk(b""))

    async def body(calls: LeanCalls, s: Session, seen: list[dict[str, Any]]) -> None:
        out = await calls.call(s, "echo", {"text": "x"}, None)
        assert out["content"][0]["text"] == location.format(port=port[0]).split(
            "127.0.0.1:" + str(port[0]))[-1]
        assert [x["target"] for x in seen] == ["/mcp", out["content"][0]["text"]]
        assert seen[0]["body"] == seen[1]["body"]  # the same request, once each

    run(reply, body, port_out=port)


@pytest.mark.parametrize("location", ["http://127.0.0.2:{port}/mcp", "http://127.0.0.1:1/mcp",
                                      "https://127.0.0.1:{port}/mcp",
                                      "http://u:p@127.0.0.1:{port}/mcp"])
def test_a_cross_origin_redirect_is_refused_clearly(location: str) -> None:
    port: list[int] = []

    async def reply(req: dict[str, Any], w: asyncio.StreamWriter) -> None:
        w.write(head(307, None, "\r\nlocation: " + location.format(port=port[0]),
                     length=0))

    async def body(calls: LeanCalls, s: Session, seen: list[dict[str, Any]]) -> None:
        with pytest.raises(MCPError) as err:
            await calls.call(s, "echo", {}, None)
        said = err.value.message
        assert said.startswith("Redirect to ") and "not followed: it leaves the " \
            "upstream's origin http://127.0.0.1:" in said, said
        assert "u:p" not in said  # credentials are never shown
        assert len(seen) == 1

    run(reply, body, port_out=port)


def test_redirect_loops_stop() -> None:
    async def reply(req: dict[str, Any], w: asyncio.StreamWriter) -> None:
        w.write(head(307, None, "\r\nlocation: /mcp", length=0))

    async def body(calls: LeanCalls, s: Session, seen: list[dict[str, Any]]) -> None:
        with pytest.raises(MCPError, match="more than 20 redirects"):
            await calls.call(s, "echo", {}, None)
        assert len(seen) == 21

    run(reply, body)


def test_a_redirect_whose_body_breaks_is_the_calls_transport_error_never_resent() -> None:
    """Reading a redirect's body fails: the call's TRANSPORT_FAILED error (not an
    answer of the upstream), the connection closed, nothing sent again (review #25)."""
    async def reply(req: dict[str, Any], w: asyncio.StreamWriter) -> None:
        w.write(head(307, None, "\r\nlocation: /mcp/", length=100) + b"partial")
        await w.drain()
        w.close()

    async def body(calls: LeanCalls, s: Session, seen: list[dict[str, Any]]) -> None:
        with pytest.raises(MCPError) as err:
            await calls.call(s, "echo", {}, None)
        assert err.value.message.startswith(TRANSPORT_FAILED_TEXT), err.value.message
        assert len(seen) == 1

    run(reply, body)


def test_a_redirect_with_a_long_or_unsized_body_is_followed_without_reading_it() -> None:
    """A chunked (unsized) redirect body is not read: the connection is closed and the
    request goes to the new target on another one."""
    async def reply(req: dict[str, Any], w: asyncio.StreamWriter) -> None:
        if req["target"] == "/mcp":
            w.write(head(307, None, "\r\nlocation: /mcp/") + chunk(b"x" * 70_000))
            await w.drain()  # never ends its body: only a reader that waits would hang
        else:
            w.write(head(200, "application/json") + chunk(response(req["body"]["id"]))
                    + chunk(b""))

    async def body(calls: LeanCalls, s: Session, seen: list[dict[str, Any]]) -> None:
        with anyio.fail_after(10):
            await call_ok(calls, s, seen)
        assert [x["target"] for x in seen] == ["/mcp", "/mcp/"]
        assert seen[0]["peer"] != seen[1]["peer"]  # a new connection

    run(reply, body)


def test_a_404_after_a_followed_redirect_is_not_a_lost_session() -> None:
    """A redirect's target without an endpoint says nothing of the session: a plain
    error, the session kept, nothing resent (review #25)."""
    async def reply(req: dict[str, Any], w: asyncio.StreamWriter) -> None:
        if req["target"] == "/mcp":
            w.write(head(307, None, "\r\nlocation: /gone", length=0))
        else:
            w.write(head(404, "text/plain", length=9) + b"not found")

    async def body(calls: LeanCalls, s: Session, seen: list[dict[str, Any]]) -> None:
        with pytest.raises(MCPError) as err:
            await calls.call(s, "echo", {}, None)
        assert err.value.message == "Not Found"
        assert len(seen) == 2

    _, lost, _ = run(reply, body)
    assert lost == []


def test_port_zero_in_a_url_is_port_zero_not_the_default() -> None:
    assert lean_origin("http://127.0.0.1:0/mcp") in (None, ("127.0.0.1", 0, "/mcp"))
    assert lean_origin("http://127.0.0.1/mcp") == ("127.0.0.1", 80, "/mcp")


def test_a_stream_ended_after_an_event_id_is_resumed_with_last_event_id() -> None:
    async def reply(req: dict[str, Any], w: asyncio.StreamWriter) -> None:
        if req["method"] == "POST":
            w.write(head(200, "text/event-stream") + chunk(b"id: e1\nretry: 10\ndata:\n\n")
                    + b"0\r\n\r\n")
            return
        assert req["headers"]["last-event-id"] == "e1"
        data = b"id: e2\ndata: " + response("whatever") + b"\n\n"
        w.write(head(200, "text/event-stream") + chunk(data) + b"0\r\n\r\n")

    async def body(calls: LeanCalls, s: Session, seen: list[dict[str, Any]]) -> None:
        assert (await calls.call(s, "echo", {}, None))["isError"] is False
        assert [r["method"] for r in seen] == ["POST", "GET"]

    run(reply, body)


def test_a_stream_ended_without_response_or_id_is_the_sdks_error() -> None:
    async def reply(req: dict[str, Any], w: asyncio.StreamWriter) -> None:
        w.write(head(200, "text/event-stream") + b"0\r\n\r\n")

    async def body(calls: LeanCalls, s: Session, seen: list[dict[str, Any]]) -> None:
        with pytest.raises(MCPError) as err:
            await calls.call(s, "echo", {}, None)
        assert err.value.message == "SSE stream ended without a response"

    run(reply, body)


def test_no_connection_is_a_transport_failure() -> None:
    async def main() -> None:
        import socket
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]  # bound, not listening: refused
            calls = lean(port, [], [], [])
            with pytest.raises(MCPError) as err:
                await calls.call(Session(), "echo", {}, None)
        assert err.value.code == TRANSPORT_FAILED

    anyio.run(main)


@pytest.mark.parametrize("url", ["https://h/mcp", "http://u:p@h/mcp", "ftp://h/x", "http://"])
def test_only_plain_http_urls_are_lean(url: str) -> None:
    assert lean_origin(url) is None


def test_a_proxied_host_is_not_lean(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTTP_PROXY", "http://proxy:3128")
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    assert lean_origin("http://example.org:8000/mcp") is None
    monkeypatch.setenv("NO_PROXY", "example.org")
    assert lean_origin("http://example.org:8000/mcp?x=1") == ("example.org", 8000, "/mcp?x=1")


def test_manifest_headers_never_override_the_requests_own() -> None:
    http = LeanHttp("h", 8080, "/mcp", {"Accept": "x/y", "Authorization": "Bearer t",
                                        "Host": "evil"}, keepalive_s=1, drain_s=1)
    fixed = http._fixed.lower()
    assert "accept" not in fixed and "host: h:8080\r\n" in fixed
    assert "authorization: bearer t" in fixed


def test_a_header_value_with_a_line_break_keeps_the_sdks_path() -> None:
    assert LeanCalls.usable(Session(), Transport(), {"authorization": "Bearer t"})
    assert not LeanCalls.usable(Session(), Transport(), {"x": "a\r\nb: c"})


def test_only_a_posts_404_is_marked_not_taken_never_a_resumptions() -> None:
    """404 to the POST: the upstream never ran it (marked, resendable); 404 to the
    resumption GET: it may have run (the session is marked lost, the call fails
    unmarked: never resent)."""
    async def reply(req: dict[str, Any], w: asyncio.StreamWriter) -> None:
        if req["method"] == "GET" or req["body"]["params"]["name"] == "gone":
            w.write(head(404, None, length=0))
            return
        w.write(head(200, "text/event-stream") + chunk(b"id: e1\nretry: 10\ndata:\n\n")
                + b"0\r\n\r\n")

    async def body(calls: LeanCalls, s: Session, seen: list[dict[str, Any]]) -> None:
        with pytest.raises(MCPError) as err:
            await calls.call(s, "gone", {}, None)
        assert not_taken(err.value)
        with pytest.raises(MCPError) as err:
            await calls.call(s, "ran", {}, None)
        assert err.value.message == "Session terminated" and not not_taken(err.value)
        assert [r["method"] for r in seen] == ["POST", "POST", "GET"]

    _, lost, _ = run(reply, body)
    assert lost == [True, True]


def test_the_sdk_paths_post_404_is_marked_not_taken() -> None:
    from icore.mcp._upstream import keepalive_http_client

    async def reply(req: dict[str, Any], w: asyncio.StreamWriter) -> None:
        w.write(head(404, "text/plain", length=2) + b"no")

    async def main() -> None:
        lost: list[bool] = []
        async with server(reply) as (port, _):
            async with keepalive_http_client(on_lost=lambda: lost.append(True)) as client:
                url = f"http://127.0.0.1:{port}/mcp"
                hdr = {"mcp-session-id": "sid-1"}
                r = await client.post(url, json={"jsonrpc": "2.0", "id": 7,
                                                 "method": "tools/call"}, headers=hdr)
                g = await client.get(url, headers=hdr)
        err = r.json()["error"]
        assert (r.status_code, r.json()["id"], err["message"]) == (404, 7,
                                                                   "Session terminated")
        assert err["data"] == {NOT_TAKEN: True}
        assert g.status_code == 404 and g.content == b"no"  # a GET's 404: unmarked
        assert lost == [True, True]

    anyio.run(main)


def test_a_lost_flag_set_by_another_call_never_resends_this_one() -> None:
    """Only this request's own marked 404 is a resend; a session marked lost by another
    call fails this one as it is, and the next request reconnects first."""
    from icore.mcp._gateway_manifest import UpstreamSpec
    from icore.mcp._upstream import Upstream, _SessionLost

    async def main() -> None:
        async def note(*_: Any) -> None:
            pass
        u = Upstream("up", UpstreamSpec(url="http://127.0.0.1:9/mcp", timeout_s=5), note)
        u.session_lost = True

        async def ran(_: Any) -> Any:
            raise MCPError(-32603, "internal error after side effect")

        async def gone(_: Any) -> Any:
            raise not_taken_error()

        with pytest.raises(MCPError):
            await u._once("tools/call", ran, object(), 0)
        with pytest.raises(_SessionLost):
            await u._once("tools/call", gone, object(), 0)
        u.session, u._inbox = object(), object()
        assert not u.alive()  # the next request reconnects before sending

    anyio.run(main)


def test_drop_leaves_a_newer_connection_in_progress_alone() -> None:
    from icore.mcp._gateway_manifest import UpstreamSpec
    from icore.mcp._upstream import Upstream

    async def note(*_: Any) -> None:
        pass
    u = Upstream("up", UpstreamSpec(url="http://127.0.0.1:9/mcp", timeout_s=5), note)

    async def main() -> None:
        old, new = anyio.CancelScope(), anyio.CancelScope()
        u.generation, u._live, u._scope = 1, (1, old), new  # gen 2 initializing in `new`
        u.drop(1)
        assert old.cancel_called and not new.cancel_called
        u.drop(1)  # a second request that saw the same crash: nothing more
        assert not new.cancel_called

    anyio.run(main)


@pytest.mark.parametrize("version", ["1.1", "1.0"])
def test_a_body_ended_by_the_connections_close_is_complete(version: str) -> None:
    """No content-length, not chunked: the body ends when the server closes (the tool
    ran, its result is the answer, not a transport failure)."""
    async def reply(req: dict[str, Any], w: asyncio.StreamWriter) -> None:
        w.write(f"HTTP/{version} 200 OK\r\ncontent-type: application/json\r\n"
                "connection: close\r\n\r\n".encode() + response(req["body"]["id"]))
        await w.drain()
        w.close()

    async def body(calls: LeanCalls, s: Session, seen: list[dict[str, Any]]) -> None:
        assert (await calls.call(s, "echo", {}, None))["isError"] is False
        assert (await calls.call(s, "echo", {}, None))["isError"] is False  # a new one
        assert seen[0]["peer"] != seen[1]["peer"] and not calls.http.idle

    run(reply, body)


def test_a_close_before_a_length_delimited_body_ended_still_fails() -> None:
    async def reply(req: dict[str, Any], w: asyncio.StreamWriter) -> None:
        w.write(head(200, "application/json", length=500) + b'{"jsonrpc"')
        await w.drain()
        w.close()

    async def body(calls: LeanCalls, s: Session, seen: list[dict[str, Any]]) -> None:
        with pytest.raises(MCPError) as err:
            await calls.call(s, "echo", {}, None)
        assert err.value.code == TRANSPORT_FAILED

    run(reply, body)


def test_a_timeout_while_settling_keeps_the_result_read(monkeypatch: pytest.MonkeyPatch
                                                        ) -> None:
    """The response event was read; the caller's deadline passes while the stream's end
    is awaited: the call has its result (the upstream ran it), not a timeout."""
    import icore.mcp._upstream_lean as lean_mod
    monkeypatch.setattr(lean_mod, "SETTLE_S", 0.3)

    async def reply(req: dict[str, Any], w: asyncio.StreamWriter) -> None:
        data = b"data: " + response(req["body"]["id"]) + b"\n\n"
        w.write(head(200, "text/event-stream") + chunk(data))  # the end never comes
        await w.drain()
        await asyncio.sleep(1)

    async def body(calls: LeanCalls, s: Session, seen: list[dict[str, Any]]) -> None:
        with anyio.move_on_after(0.1):
            out = await calls.call(s, "echo", {}, None)
        assert out["isError"] is False

    _, _, spawned = run(reply, body)
    assert not spawned  # answered: nothing to cancel


def test_sse_empty_event_is_a_message_and_empty_id_no_resumption_point() -> None:
    from icore.mcp._lean_answers import sse_fields as _fields
    assert _fields(b"event:\ndata: x")[0] == "message"
    assert _fields(b"event\ndata: x")[0] == "message"
    assert _fields(b"id:\ndata: x")[2] is None
    assert _fields(b"id: e1\nevent: ping")[:3:2] == ("ping", "e1")

    async def reply(req: dict[str, Any], w: asyncio.StreamWriter) -> None:
        data = b"id:\nevent:\ndata: " + response(req["body"]["id"]) + b"\n\n"
        w.write(head(200, "text/event-stream") + chunk(data) + b"0\r\n\r\n")

    async def body(calls: LeanCalls, s: Session, seen: list[dict[str, Any]]) -> None:
        assert (await calls.call(s, "echo", {}, None))["isError"] is False

    run(reply, body)


def test_the_path_is_percent_encoded_as_httpx_does() -> None:
    assert lean_origin("http://h:8/a b/\u00e9;x=1?q=a b&r=/?") == (
        "h", 8, "/a%20b/%C3%A9;x=1?q=a%20b&r=/?")
    assert lean_origin("http://h/a%20b")[2] == "/a%20b"  # type: ignore[index]


def test_a_header_not_latin1_is_refused_before_a_connection_is_taken() -> None:
    from icore.mcp._lean_http import LeanHttpError

    async def main() -> None:
        http = LeanHttp("127.0.0.1", 9, "/", {}, keepalive_s=1, drain_s=1)
        for bad in ("\u20ac", "a\r\nx: y"):
            with pytest.raises(LeanHttpError, match="not sent"):
                await http.request("POST", {"mcp-session-id": bad}, b"{}")

    anyio.run(main)


def test_the_idle_pool_is_capped() -> None:
    from icore.mcp._lean_http import MAX_IDLE

    async def reply(req: dict[str, Any], w: asyncio.StreamWriter) -> None:
        await asyncio.sleep(0.05)
        data = response(req["body"]["id"])
        w.write(head(200, "application/json", length=len(data)) + data)

    async def body(calls: LeanCalls, s: Session, seen: list[dict[str, Any]]) -> None:
        async with anyio.create_task_group() as tg:
            for _ in range(MAX_IDLE + 5):
                tg.start_soon(calls.call, s, "echo", {}, None)
        assert len({r["peer"] for r in seen}) == MAX_IDLE + 5
        assert len(calls.http.idle) == MAX_IDLE

    run(reply, body)


def test_the_sdks_post_writer_takes_what_http_streams_passes() -> None:
    """``http_streams`` calls the SDK's private ``post_writer`` positionally: pinned."""
    import inspect

    from mcp.client.streamable_http import StreamableHTTPTransport

    from icore.mcp._upstream_lean import POST_WRITER_PARAMS, lean_support
    params = tuple(inspect.signature(StreamableHTTPTransport.post_writer).parameters)
    assert params == POST_WRITER_PARAMS
    assert lean_support()


def test_lean_off_uses_nothing_private(monkeypatch: pytest.MonkeyPatch) -> None:
    import icore.mcp._upstream_lean as lean_mod

    def boom() -> bool:
        raise AssertionError("lean_support consulted with ICORE_MCP_LEAN=0")
    monkeypatch.setattr(lean_mod, "lean_support", boom)
    monkeypatch.setenv("ICORE_MCP_LEAN", "0")
    assert not lean_mod.lean_wanted("http://127.0.0.1:9/mcp")


def test_an_sdk_without_the_private_parts_falls_back(monkeypatch: pytest.MonkeyPatch,
                                                      caplog: pytest.LogCaptureFixture
                                                      ) -> None:
    import sys

    import icore.mcp._upstream_lean as lean_mod
    monkeypatch.setattr(lean_mod, "_unsupported", [])
    monkeypatch.setitem(sys.modules, "mcp.shared._compat", None)  # import fails
    monkeypatch.delenv("ICORE_MCP_LEAN", raising=False)
    with caplog.at_level("WARNING", "icore.mcp"):
        assert not lean_mod.lean_wanted("http://127.0.0.1:9/mcp")
        assert not lean_mod.lean_wanted("http://127.0.0.1:9/mcp")
    assert len([r for r in caplog.records if "lean HTTP path is off" in r.message]) == 1


def test_the_result_checks_are_imported_before_the_call_is_sent(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import icore.mcp._upstream_lean as lean_mod

    def missing() -> Any:
        raise ImportError("no _clamp_inbound_ttl")
    monkeypatch.setattr(lean_mod, "result_checks", missing)

    async def reply(req: dict[str, Any], w: asyncio.StreamWriter) -> None:
        data = response(req["body"]["id"])
        w.write(head(200, "application/json", length=len(data)) + data)

    async def body(calls: LeanCalls, s: Session, seen: list[dict[str, Any]]) -> None:
        with pytest.raises(ImportError):
            await calls.call(s, "echo", {}, None)
        assert not seen  # nothing ran upstream

    run(reply, body)
