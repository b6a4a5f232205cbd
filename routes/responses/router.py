"""OpenAI's Responses API: POST /v1/responses, stateless.

Thin: validate, start the generation (errors here still get their status code), then answer
JSON or SSE. The logic lives in routes/responses/serving.py.
"""

from __future__ import annotations

from fastapi import APIRouter, Request
from sse_starlette import EventSourceResponse

from routes.door.answer import answer
from routes.door.media import load_media
from routes.http.deps import ERROR_RESPONSES, ModelsDep
from routes.http.request_ids import request_id
from routes.http.sse import sse_response_doc
from routes.responses import serving
from schemas.responses import RESPONSE_STREAM_EVENTS, ResponsesRequest, ResponsesResponse

router = APIRouter(prefix="/v1", tags=["openai"])

_STREAM = sse_response_doc(
    "A response. With `stream: true`: server-sent events, each `event: <type>` with "
    "`data: <event>` (see components/schemas): `response.created`, `response.in_progress`, "
    "the output items' events, then `response.completed` (`response.incomplete` at the token "
    "limit). A failure after the stream started is an `error` event, and the stream ends "
    "there. No `[DONE]`.",
    *RESPONSE_STREAM_EVENTS,
)


@router.post(
    "/responses",
    response_model=ResponsesResponse,
    responses={200: _STREAM, **ERROR_RESPONSES},
    summary="Create a response (OpenAI Responses API, stateless)",
)
async def create_response(
    body: ResponsesRequest, models: ModelsDep, request: Request
) -> ResponsesResponse | EventSourceResponse:
    responses = await load_media(request, serving.responses_request(body, request_id(request)))
    handle = await models.submit(responses)
    return await answer(request, serving.RESPONSES, handle, body, stream=body.stream)
