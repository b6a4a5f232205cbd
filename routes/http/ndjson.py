"""Newline-delimited JSON streams (Ollama's): one JSON object a line.

As with server-sent events (routes/http/sse.py), once a stream has started its status cannot
change: a failure after that is one last line, the error policy's body in the door's shape,
and the stream ends there. A client that leaves closes the stream's generator, which cancels
its generation (the request handle's iteration ends).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

from starlette.responses import StreamingResponse
from starlette.types import Send

from routes.http.errors import failure

MEDIA_TYPE = "application/x-ndjson"
# A door's error line: (status, the error body in the one shape) -> the JSON object to send.
ErrorLine = Callable[[int, dict[str, Any]], str]


async def ndjson_lines(payloads: AsyncIterator[str], error_line: ErrorLine) -> AsyncIterator[str]:
    """Each payload (one JSON object, no newline in it) as a line; any exception ends the
    stream with ``error_line``'s object."""
    try:
        async for payload in payloads:
            yield payload + "\n"
    except Exception as exc:
        f = failure(exc, during="stream")
        yield error_line(f.status, f.body) + "\n"
    finally:
        close = getattr(payloads, "aclose", None)
        if close is not None:  # the door's generator, and with it the generation
            await close()


class NdjsonResponse(StreamingResponse):
    """A streamed body of JSON lines whose generator is closed as soon as the response ends,
    however it ends (a client gone mid-stream included), not whenever it is collected."""

    def __init__(self, lines: AsyncIterator[str]) -> None:
        super().__init__(lines, media_type=MEDIA_TYPE)
        self._lines = lines

    async def stream_response(self, send: Send) -> None:
        try:
            await super().stream_response(send)
        finally:
            close = getattr(self._lines, "aclose", None)
            if close is not None:
                await close()


def ndjson_stream(payloads: AsyncIterator[str], error_line: ErrorLine) -> NdjsonResponse:
    return NdjsonResponse(ndjson_lines(payloads, error_line))
