"""Stateful Responses over the store (routes/responses/store.py): the conversation a request
continues (``previous_response_id``), keeping its response (``store``), and its input items a
page at a time. FastAPI-free, like serving.py.

A continued conversation is the stored response's input items, then its output items exactly
as they were produced (its calls included), then the new input; the stored ``instructions``
are not carried over (OpenAI's rule: only the new request's apply). Rendered by the chat
template, that conversation starts with the earlier turn's prompt and answer, so the engine's
prefix reuse finds the earlier turn's KV cache (docs/api/responses.md says how far it goes).
"""

from __future__ import annotations

import asyncio
import sqlite3
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import TypeAdapter

from backends.errors import GenAIError, InvalidRequest, StartupError
from backends.types import Transcript
from routes.door import ids
from routes.responses.store import ResponseStore, StoredResponse, StoreLimits
from schemas.responses import InputItem, ResponsesRequest, ResponsesResponse
from schemas.settings import ServerSettings

MIB = 1024 * 1024
_ITEM: TypeAdapter[Any] = TypeAdapter(InputItem)
_ID_PREFIX = {
    "message": ids.MESSAGE,
    "function_call": ids.FUNCTION_CALL,
    "function_call_output": ids.FUNCTION_CALL_OUTPUT,
    "reasoning": ids.REASONING,
}


class ResponseNotFound(GenAIError):
    """An id that is unknown, expired or deleted (OpenAI's 404 for it)."""

    status_code = 404
    error_type = "invalid_request_error"


class PreviousResponseNotFound(InvalidRequest):
    """``previous_response_id`` names no stored response (OpenAI answers it with a 400)."""

    code = "previous_response_not_found"


def open_store(settings: ServerSettings) -> ResponseStore:
    """The store the settings describe: in memory, or in the GENAI_RESPONSES_DB file."""
    limits = StoreLimits(
        settings.responses_max, int(settings.responses_max_mib * MIB), settings.responses_ttl
    )
    path = settings.responses_db.expanduser() if settings.responses_db else None
    try:
        return ResponseStore(path, limits)
    except (sqlite3.Error, OSError) as exc:
        raise StartupError(f"Cannot open GENAI_RESPONSES_DB={path}: {exc}.") from None


@dataclass(frozen=True)
class Turn:
    """One POST /v1/responses: its body, the stored conversation it continues (items as JSON,
    each with its id) and the store that keeps its response (None: ``store: false``)."""

    body: ResponsesRequest
    earlier: list[dict[str, Any]] = field(default_factory=list)
    store: ResponseStore | None = None
    continues: Transcript | None = None  # the tokens the earlier turn read and wrote

    def earlier_items(self) -> list[Any]:
        """The earlier items as input items (the prompt is made of them, then the input)."""
        return [_ITEM.validate_python(item) for item in self.earlier]

    async def keep(self, response: ResponsesResponse, transcript: Transcript | None) -> None:
        """Store the finished response with its input items (given ids where they had none)
        and the tokens its model read and wrote; one too large to store says so (``store:
        false``)."""
        if self.store is None:
            return
        items = [*self.earlier, *(_with_id(item) for item in self.body.input)]
        body = response.model_dump(mode="json", by_alias=True)
        stored = StoredResponse(response.id, body, items, _kept(transcript))
        if not await asyncio.to_thread(self.store.put, stored):
            response.store = False


async def begin(body: ResponsesRequest, store: ResponseStore) -> Turn:
    """The request's turn: the conversation ``previous_response_id`` names (a 400 when it is
    not stored), and where its response goes."""
    earlier: list[dict[str, Any]] = []
    continues = None
    if body.previous_response_id is not None:
        previous = await asyncio.to_thread(store.get, body.previous_response_id)
        if previous is None:
            raise PreviousResponseNotFound(
                f"Previous response with id '{body.previous_response_id}' not found.",
                param="previous_response_id",
            )
        earlier = previous.conversation()
        continues = _transcript(previous.transcript)
    return Turn(body, earlier, None if body.store is False else store, continues)


def _kept(transcript: Transcript | None) -> dict[str, Any] | None:
    """A transcript as the store keeps it (JSON); :func:`_transcript` reads it back."""
    if transcript is None:
        return None
    return {"model": transcript.model, "text": transcript.text, "ids": list(transcript.token_ids)}


def _transcript(kept: dict[str, Any] | None) -> Transcript | None:
    """A stored transcript (None for a response stored without one, or by an older version)."""
    if not kept:
        return None
    return Transcript(str(kept["model"]), str(kept["text"]), tuple(int(t) for t in kept["ids"]))


async def stored(store: ResponseStore, response_id: str) -> StoredResponse:
    found = await asyncio.to_thread(store.get, response_id)
    if found is None:
        raise _not_found(response_id)
    return found


async def delete(store: ResponseStore, response_id: str) -> None:
    if not await asyncio.to_thread(store.delete, response_id):
        raise _not_found(response_id)


def page(
    items: list[dict[str, Any]],
    order: Literal["asc", "desc"],
    limit: int,
    after: str | None,
    before: str | None = None,
) -> dict[str, Any]:
    """One page of input items, as OpenAI lists them: newest first unless ``order`` is
    ``asc``; the page starts after the item ``after`` names, or ends just before the item
    ``before`` names (the ``limit`` items before it: the previous page)."""
    ordered = items if order == "asc" else items[::-1]
    start = 0 if after is None else _index(ordered, after, "after") + 1
    end = len(ordered) if before is None else _index(ordered, before, "before")
    if before is not None and after is None:  # the page just before ``before``
        start = max(0, end - limit)
        more = start > 0
    else:
        more = start + limit < end
    data = ordered[start : min(end, start + limit)]
    return {
        "object": "list",
        "data": data,
        "first_id": data[0]["id"] if data else None,
        "last_id": data[-1]["id"] if data else None,
        "has_more": more,
    }


def _index(items: list[dict[str, Any]], item_id: str, param: str) -> int:
    at = next((i for i, item in enumerate(items) if item.get("id") == item_id), None)
    if at is None:
        raise InvalidRequest(f"No input item {item_id!r} in this response.", param=param)
    return at


def _not_found(response_id: str) -> ResponseNotFound:
    return ResponseNotFound(f"Response with id '{response_id}' not found.")


def _with_id(item: Any) -> dict[str, Any]:
    """An input item as stored and listed: with an id and a status, and output text parts
    with their (empty) annotations, as OpenAI's item types have them."""
    out: dict[str, Any] = item.model_dump(mode="json", exclude_none=True, by_alias=True)
    out.setdefault("id", ids.new_id(_ID_PREFIX[out["type"]]))
    out.setdefault("status", "completed")
    for part in out.get("content") or ():
        if part.get("type") == "output_text":
            part.setdefault("annotations", [])
    return out
