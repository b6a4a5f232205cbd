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

import logging
import re
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import psycopg
from pydantic import TypeAdapter

from backends.errors import GenAIError, InvalidRequest, StartupError
from backends.types import Transcript
from config.settings import ServerSettings
from routes.door import ids
from routes.responses import postgres_store
from routes.responses.postgres_store import PostgresStore
from routes.responses.sqlite_store import SqliteStore
from routes.responses.store import (
    ResponseStore,
    StoredResponse,
    StoreLimits,
    StoreUnavailable,
    UnknownSchema,
)
from schemas.responses import InputItem, ResponsesRequest, ResponsesResponse

log = logging.getLogger("genai.responses")

MIB = 1024 * 1024
KEY_SHARE = 4  # each key's quota, unset: a quarter of the table's bounds
# What a stored response's id can be (ours are resp_ and 32 hex digits; OpenAI's are longer):
# anything else is unknown without asking the store (a NUL is a 500 in PostgreSQL, a long one
# a long round trip and a long error).
_STORED_ID = re.compile(r"[A-Za-z0-9_-]{1,128}")
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
    """The store the settings describe: in memory, in the GENAI_RESPONSES_DB file, or in the
    PostgreSQL database it names (postgresql://…)."""
    limits = store_limits(settings)
    location, timeout = settings.responses_db, settings.responses_timeout
    try:
        if location is not None and postgres_store.is_url(location):
            return PostgresStore(location, limits, timeout=timeout)
        path = Path(location).expanduser() if location else None
        return SqliteStore(path, limits, timeout=timeout)
    except UnknownSchema as exc:
        raise StartupError(str(exc)) from None
    except (sqlite3.Error, psycopg.Error, OSError, StoreUnavailable) as exc:
        url = location is not None and postgres_store.is_url(location)
        named = postgres_store.describe(location) if url and location else location
        reason = " ".join(str(exc).split())  # libpq's messages span lines
        end = "" if reason.endswith((".", "?")) else "."
        raise StartupError(f"Cannot open GENAI_RESPONSES_DB={named}: {reason}{end}") from None


def store_limits(settings: ServerSettings) -> StoreLimits:
    """The table's bounds, and each key's quota: as set, or a quarter of the table's."""
    most, size = settings.responses_max, int(settings.responses_max_mib * MIB)
    key_size = settings.responses_key_max_mib
    return StoreLimits(
        most,
        size,
        settings.responses_ttl,
        settings.responses_key_max or max(1, most // KEY_SHARE),
        int(key_size * MIB) if key_size else max(1, size // KEY_SHARE),
    )


@dataclass(frozen=True)
class Turn:
    """One POST /v1/responses: its body, the stored conversation it continues (items as JSON,
    each with its id), the store that keeps its response (None: ``store: false``) and whose
    it is there (the hash of the request's key; None without keys)."""

    body: ResponsesRequest
    earlier: list[dict[str, Any]] = field(default_factory=list)
    store: ResponseStore | None = None
    continues: Transcript | None = None  # the tokens the earlier turn read and wrote
    owner: str | None = None

    def earlier_items(self) -> list[Any]:
        """The earlier items as input items (the prompt is made of them, then the input)."""
        return [_ITEM.validate_python(item) for item in self.earlier]

    async def keep(self, response: ResponsesResponse, transcript: Transcript | None) -> None:
        """Store the finished response with its input items (given ids where they had none)
        and the tokens its model read and wrote; one too large to store, or a store out of
        reach, says so (``store: false``; the log says why): the answer is not lost for it."""
        if self.store is None:
            return
        items = [*self.earlier, *(_with_id(item) for item in self.body.input)]
        body = response.model_dump(mode="json", by_alias=True)
        stored = StoredResponse(response.id, body, items, _kept(transcript), self.owner)
        try:
            kept = await self.store.calls(self.store.put, stored)
        except StoreUnavailable:
            log.warning("response %s not stored: the store cannot be reached", response.id)
            kept = False
        if not kept:
            response.store = False


async def begin(body: ResponsesRequest, store: ResponseStore, owner: str | None = None) -> Turn:
    """The request's turn for ``owner``: the conversation ``previous_response_id`` names (a 400
    when it is not stored, or is another owner's), and where its response goes."""
    earlier: list[dict[str, Any]] = []
    continues = None
    if body.previous_response_id is not None:
        previous = None
        if _STORED_ID.fullmatch(body.previous_response_id):
            previous = await store.calls(store.get, body.previous_response_id, owner)
        if previous is None:
            raise PreviousResponseNotFound(
                f"Previous response with id '{shown(body.previous_response_id)}' not found.",
                param="previous_response_id",
            )
        earlier = previous.conversation()
        continues = _transcript(previous.transcript)
    return Turn(body, earlier, None if body.store is False else store, continues, owner)


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


async def stored(store: ResponseStore, response_id: str, owner: str | None) -> StoredResponse:
    """``owner``'s stored response (404 for another owner's, as for one never stored)."""
    found = None
    if _STORED_ID.fullmatch(response_id):
        found = await store.calls(store.get, response_id, owner)
    if found is None:
        raise _not_found(response_id)
    return found


async def delete(store: ResponseStore, response_id: str, owner: str | None) -> None:
    if not _STORED_ID.fullmatch(response_id) or not await store.calls(
        store.delete, response_id, owner
    ):
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
        raise InvalidRequest(f"No input item '{shown(item_id)}' in this response.", param=param)
    return at


def _not_found(response_id: str) -> ResponseNotFound:
    return ResponseNotFound(f"Response with id '{shown(response_id)}' not found.")


def shown(given: str, at_most: int = 64) -> str:
    """An id as an error message repeats it: control characters escaped, and cut short."""
    escaped = given[: at_most + 1].encode("unicode_escape").decode("ascii")
    return escaped if len(escaped) <= at_most else escaped[:at_most] + "…"


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
