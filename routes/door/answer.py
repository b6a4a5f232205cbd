"""Every door's answer to a request it submitted: the whole response, or a stream of it.

A route is four steps: validate the body (FastAPI), build the core's request, submit it (an
error there is still an HTTP status), then :func:`answer`. Each protocol's serving module
says how it answers in a :class:`Door`: its whole response, its stream's payloads and, where
its shape is not the one shape, its stream's error event. Streams are server-sent events,
or JSON lines for Ollama's API (:func:`answer_lines`).

Errors follow one policy (routes/http/errors.py): before a stream starts they are HTTP
responses, made by the app's exception handlers; after, the stream ends with one error event
in the protocol's shape (routes/http/sse.py, routes/http/ndjson.py).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Generic, Literal, TypeVar, overload

from fastapi import Request
from sse_starlette import EventSourceResponse

from backends.core.handle import RequestHandle
from routes.http.cancellation import unless_disconnected
from routes.http.deps import get_settings
from routes.http.ndjson import ErrorLine, NdjsonResponse, ndjson_stream
from routes.http.sse import ErrorEvent, Payload, event_stream

Body = TypeVar("Body")
Whole = TypeVar("Whole")


@dataclass(frozen=True)
class Stream:
    """One response's stream: its payloads, and the event that ends it on a failure (None:
    ``data: {"error": ...}`` in the one shape)."""

    payloads: AsyncIterator[Payload]
    error_event: ErrorEvent | None = None


@dataclass(frozen=True)
class Lines:
    """One response streamed as JSON lines (Ollama's): its objects, and the line that ends it
    on a failure."""

    payloads: AsyncIterator[str]
    error_line: ErrorLine


@dataclass(frozen=True)
class Door(Generic[Body, Whole]):
    """How a protocol answers a submitted request: ``whole`` runs it to its end; ``stream``
    (None where the route never streams) sends it as it is made, as server-sent events
    (:class:`Stream`) or JSON lines (:class:`Lines`)."""

    whole: Callable[[RequestHandle, Body], Awaitable[Whole]]
    stream: Callable[[RequestHandle, Body], Stream | Lines] | None = None


# The route's own return type, whether it always streams, never does, or as the body asks.
@overload
async def answer(
    request: Request,
    door: Door[Body, Whole],
    handle: RequestHandle,
    body: Body,
    *,
    stream: Literal[False],
) -> Whole: ...
@overload
async def answer(
    request: Request,
    door: Door[Body, Whole],
    handle: RequestHandle,
    body: Body,
    *,
    stream: Literal[True],
) -> EventSourceResponse: ...
@overload
async def answer(
    request: Request, door: Door[Body, Whole], handle: RequestHandle, body: Body, *, stream: bool
) -> Whole | EventSourceResponse: ...
async def answer(
    request: Request, door: Door[Body, Whole], handle: RequestHandle, body: Body, *, stream: bool
) -> Whole | EventSourceResponse:
    """Stream (SSE, with keep-alive pings) or answer once the request is done; either way a
    client that leaves cancels the generation."""
    if stream:
        assert door.stream is not None, "this door does not stream"
        events = door.stream(handle, body)
        assert isinstance(events, Stream), "this door streams JSON lines: answer_lines()"
        ping = get_settings(request).server.sse_ping
        return event_stream(events.payloads, ping, events.error_event)
    return await unless_disconnected(request, door.whole(handle, body))


async def answer_lines(
    request: Request, door: Door[Body, Whole], handle: RequestHandle, body: Body, *, stream: bool
) -> Whole | NdjsonResponse:
    """:func:`answer` for a protocol that streams newline-delimited JSON (Ollama's)."""
    if stream:
        assert door.stream is not None, "this door does not stream"
        lines = door.stream(handle, body)
        assert isinstance(lines, Lines), "this door streams server-sent events: answer()"
        return ndjson_stream(lines.payloads, lines.error_line)
    return await unless_disconnected(request, door.whole(handle, body))
