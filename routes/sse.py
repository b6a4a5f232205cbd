"""Server-sent events for every streaming door.

Once a stream has started its status code cannot change, so a failure after that is one
in-band ``data: {"error": {...}}`` event in the one error shape, and the stream ends there.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator

from sse_starlette import EventSourceResponse

from backends.errors import GenAIError
from schemas.errors import error_body

log = logging.getLogger("genai.sse")


async def sse_events(payloads: AsyncIterator[str]) -> AsyncIterator[dict[str, str]]:
    try:
        async for payload in payloads:
            yield {"data": payload}
    except GenAIError as exc:
        body = error_body(exc.message, exc.error_type, param=exc.param, code=exc.code)
        yield {"data": json.dumps(body)}
    except Exception:
        log.exception("stream failed")
        yield {"data": json.dumps(error_body("Internal server error.", "server_error"))}


def event_stream(payloads: AsyncIterator[str], ping: float) -> EventSourceResponse:
    """An SSE response of ``data:`` payloads, with keep-alive comments every ``ping`` s."""
    return EventSourceResponse(sse_events(payloads), ping=ping)
