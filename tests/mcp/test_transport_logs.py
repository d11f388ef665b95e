"""The HTTP gateway's log when a client goes away mid-request: one line, no traceback."""

from __future__ import annotations

import io
import logging

import anyio
import pytest

from icore.mcp._transport import _GONE_LOGGERS, ClientGoneFilter


def _closed_send() -> anyio.ClosedResourceError:
    """The error the SDK's transport meets: a send on a session's closed stream."""
    send, receive = anyio.create_memory_object_stream[int](1)
    send.close()
    receive.close()
    try:
        send.send_nowait(1)
    except anyio.ClosedResourceError as exc:
        return exc
    raise AssertionError("a closed stream accepted a send")


@pytest.fixture
def captured() -> object:
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    quiet = ClientGoneFilter()
    loggers = [logging.getLogger(n) for n in _GONE_LOGGERS]
    for lg in loggers:
        lg.addHandler(handler)
        lg.addFilter(quiet)
    yield out
    for lg in loggers:
        lg.removeHandler(handler)
        lg.removeFilter(quiet)


def test_client_gone_is_one_line(captured: io.StringIO) -> None:
    """The SDK's ``Error handling POST request`` with ClosedResourceError, then uvicorn's
    ``Exception in ASGI application`` (the error answer after the 202): one line."""
    gone = _closed_send()
    try:
        raise gone
    except anyio.ClosedResourceError:
        logging.getLogger("mcp.server.streamable_http").exception(
            "Error handling POST request")
        try:
            raise RuntimeError("Unexpected ASGI message 'http.response.start' sent, after "
                               "response already completed.")
        except RuntimeError:
            logging.getLogger("uvicorn.error").exception("Exception in ASGI application")
    text = captured.getvalue()
    assert "Traceback" not in text, text
    assert text.splitlines() == [
        "WARNING mcp.server.streamable_http: an HTTP client went away mid-request "
        "(ClosedResourceError: Error handling POST request); the gateway goes on"], text


def test_other_errors_keep_their_traceback(captured: io.StringIO) -> None:
    try:
        raise ValueError("a real bug")
    except ValueError:
        logging.getLogger("mcp.server.streamable_http").exception("Error in message router")
    try:
        raise ExceptionGroup("g", [_closed_send()])
    except ExceptionGroup:
        logging.getLogger("mcp.server.streamable_http_manager").exception("Session x crashed")
    text = captured.getvalue()
    assert text.count("Traceback") == 1 and "a real bug" in text, text
    assert "went away mid-request (ClosedResourceError: Session x crashed)" in text
