"""OpenAI's Responses API: POST /v1/responses, and the stored responses: GET and DELETE
/v1/responses/{id}, GET /v1/responses/{id}/input_items.

Thin: validate, resolve the conversation a request continues, start the generation (errors here
still get their status code), then answer JSON or SSE. The logic lives in
routes/responses/serving.py and state.py; the store on ``app.state.responses``. A stored
response is its key's: another key's request finds nothing (``OwnerDep``).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import JSONResponse
from sse_starlette import EventSourceResponse

from backends.errors import InvalidRequest
from routes.door.answer import answer
from routes.door.fields import submit
from routes.door.media import load_media
from routes.http.auth import request_owner
from routes.http.deps import ERROR_RESPONSES, ModelsDep
from routes.http.request_ids import request_id
from routes.http.sse import sse_response_doc
from routes.responses import serving, state
from routes.responses.store import ResponseStore
from schemas.errors import ErrorResponse
from schemas.responses import (
    RESPONSE_STREAM_EVENTS,
    InputItemList,
    ResponseDeleted,
    ResponsesRequest,
    ResponsesResponse,
)
from schemas.responses.request import Includable

router = APIRouter(prefix="/v1", tags=["openai"])


def get_store(request: Request) -> ResponseStore:
    """The stored responses (made by the app factory, closed when its lifespan ends)."""
    store: ResponseStore = request.app.state.responses
    return store


StoreDep = Annotated[ResponseStore, Depends(get_store)]
# Whose stored responses the request may see: its key's (None without keys).
OwnerDep = Annotated[str | None, Depends(request_owner)]

_STREAM = sse_response_doc(
    "A response. With `stream: true`: server-sent events, each `event: <type>` with "
    "`data: <event>` (see components/schemas): `response.created`, `response.in_progress`, "
    "the output items' events, then `response.completed` (`response.incomplete` at the token "
    "limit). A failure after the stream started is an `error` event, and the stream ends "
    "there. No `[DONE]`.",
    *RESPONSE_STREAM_EVENTS,
)
_STORED: dict[int | str, dict[str, Any]] = {
    400: ERROR_RESPONSES[400],
    401: ERROR_RESPONSES[401],
    404: {
        "model": ErrorResponse,
        "description": "No such response (unknown, expired, deleted, or another key's)",
    },
    503: {"model": ErrorResponse, "description": "The stored responses cannot be reached"},
}


@router.post(
    "/responses",
    response_model=ResponsesResponse,
    responses={200: _STREAM, **ERROR_RESPONSES},
    summary="Create a response (OpenAI Responses API)",
)
async def create_response(
    body: ResponsesRequest, models: ModelsDep, store: StoreDep, owner: OwnerDep, request: Request
) -> ResponsesResponse | EventSourceResponse:
    turn = await state.begin(body, store, owner)
    earlier = turn.earlier_items()
    core = serving.responses_request(body, request_id(request), earlier, turn.continues)
    handle = await submit(models, await load_media(request, core), serving.FIELDS)
    return await answer(request, serving.RESPONSES, handle, turn, stream=body.stream)


@router.get(
    "/responses/{response_id}",
    response_model=ResponsesResponse,
    responses=_STORED,
    summary="A stored response, as it was answered",
)
async def retrieve_response(
    response_id: str,
    store: StoreDep,
    owner: OwnerDep,
    stream: Annotated[
        bool, Query(description="Only false: a stored response is not replayed.")
    ] = False,
) -> JSONResponse:
    if stream:
        raise InvalidRequest(
            "not supported: stored responses are not replayed as streams", param="stream"
        )
    found = await state.stored(store, response_id, owner)
    return JSONResponse(found.response)


@router.get(
    "/responses/{response_id}/input_items",
    response_model=InputItemList,
    responses=_STORED,
    summary="A stored response's input items, a page at a time",
)
async def list_input_items(
    response_id: str,
    store: StoreDep,
    owner: OwnerDep,
    order: Literal["asc", "desc"] = "desc",
    limit: Annotated[int, Query(ge=1, le=100)] = 20,
    after: Annotated[str | None, Query(description="An item id: the page starts after it.")] = None,
    before: Annotated[
        str | None, Query(description="An item id: the page ends before it (the page before).")
    ] = None,
    include: Annotated[
        list[Includable] | None,
        Query(description="Accepted: input items are listed whole (their image URLs included)."),
    ] = None,
    include_brackets: Annotated[
        list[Includable] | None,
        Query(alias="include[]", description="`include`, as the openai SDK spells it."),
    ] = None,
) -> JSONResponse:
    found = await state.stored(store, response_id, owner)
    return JSONResponse(state.page(found.input, order, limit, after, before))


@router.delete(
    "/responses/{response_id}",
    response_model=ResponseDeleted,
    responses=_STORED,
    summary="Forget a stored response",
)
async def delete_response(response_id: str, store: StoreDep, owner: OwnerDep) -> ResponseDeleted:
    await state.delete(store, response_id, owner)
    return ResponseDeleted(id=response_id)
