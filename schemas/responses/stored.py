"""OpenAI's Responses API, stored responses: a response's input items, listed a page at a time
(``GET /v1/responses/{id}/input_items``), and what ``DELETE /v1/responses/{id}`` answers."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from schemas.responses.items import InputItem


class InputItemList(BaseModel):
    """One page of a response's input items: the conversation before its output, the chain it
    continued included (its instructions are not items)."""

    object: Literal["list"] = "list"
    data: list[InputItem] = Field(description="Items, each with its `id`, in the order asked.")
    first_id: str | None = Field(description="The first item's id (null on an empty page).")
    last_id: str | None = Field(description="The last item's id: `after` for the next page.")
    has_more: bool


class ResponseDeleted(BaseModel):
    id: str
    object: Literal["response"] = "response"
    deleted: Literal[True] = True
