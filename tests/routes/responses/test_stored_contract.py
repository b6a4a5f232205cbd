"""Contract: stored responses through the official ``openai`` client against a live server
process (main_genai.py): ``responses.create(previous_response_id=...)``, ``responses.retrieve``,
``responses.input_items.list`` (its pages followed by the SDK), ``responses.delete``, and a
SQLite file that outlives the server process."""

from __future__ import annotations

from pathlib import Path

import openai
import pytest
from openai import OpenAI

from bench.harness.server import live_server

pytestmark = pytest.mark.live

KEY = "stored-contract-key"
MODEL = "onnx-genai"
MORE = {"min_tokens": 8}
TURNS = ["What is the weather in Paris?", "And in Rome?", "Which one is warmer?"]


def client(url: str) -> OpenAI:
    return OpenAI(base_url=f"{url}/v1", api_key=KEY, max_retries=0, timeout=60)


def test_a_conversation_kept_by_the_server(tmp_path: Path) -> None:
    db = str(tmp_path / "responses.db")
    with live_server(GENAI_API_KEY=KEY, GENAI_RESPONSES_DB=db) as server:
        api = client(server.url)
        first = api.responses.create(
            model=MODEL, input=TURNS[0], extra_body=MORE, temperature=0, max_output_tokens=8
        )
        assert first.to_dict()["store"] is True
        second = api.responses.create(
            model=MODEL,
            input=TURNS[1],
            previous_response_id=first.id,
            extra_body=MORE,
            temperature=0,
            max_output_tokens=8,
        )
        assert second.previous_response_id == first.id
        assert second.usage is not None and first.usage is not None
        assert second.usage.input_tokens > first.usage.input_tokens + first.usage.output_tokens

        # The same conversation sent whole gives the same answer.
        whole = api.responses.create(
            model=MODEL,
            input=[
                {"role": "user", "content": TURNS[0]},
                *first.output,  # type: ignore[list-item]
                {"role": "user", "content": TURNS[1]},
            ],
            extra_body=MORE,
            temperature=0,
            max_output_tokens=8,
        )
        assert second.output_text == whole.output_text

        got = api.responses.retrieve(second.id)
        assert got.id == second.id and got.output_text == second.output_text
        assert got.previous_response_id == first.id

        # Pages of one item: the SDK follows ``after`` to the end, newest first.
        items = list(api.responses.input_items.list(second.id, limit=1))
        assert [item.type for item in items] == ["message"] * 3
        assert [item.role for item in items] == ["user", "assistant", "user"]  # type: ignore[union-attr]
        assert items[1].id == first.output[0].id
        asc = api.responses.input_items.list(second.id, order="asc")
        assert [item.id for item in asc.data] == [item.id for item in items][::-1]
        assert asc.has_more is False

        api.responses.delete(first.id)  # the SDK reads no body: 200 is all it checks
        with pytest.raises(openai.NotFoundError):
            api.responses.retrieve(first.id)
        with pytest.raises(openai.NotFoundError):
            api.responses.delete(first.id)
        with pytest.raises(openai.BadRequestError) as gone:
            api.responses.create(model=MODEL, input="x", previous_response_id=first.id)
        assert gone.value.code == "previous_response_not_found"
        # The later link holds the whole conversation: deleting an earlier one breaks nothing.
        api.responses.create(
            model=MODEL,
            input=TURNS[2],
            previous_response_id=second.id,
            temperature=0,
            max_output_tokens=8,
        )

        unkept = api.responses.create(
            model=MODEL, input=TURNS[0], store=False, temperature=0, max_output_tokens=8
        )
        assert unkept.to_dict()["store"] is False
        with pytest.raises(openai.NotFoundError):
            api.responses.retrieve(unkept.id)

    # A new server process on the same file.
    with live_server(GENAI_API_KEY=KEY, GENAI_RESPONSES_DB=db) as again:
        api = client(again.url)
        assert api.responses.retrieve(second.id).output_text == second.output_text
        third = api.responses.create(
            model=MODEL,
            input=TURNS[2],
            previous_response_id=second.id,
            temperature=0,
            max_output_tokens=8,
        )
        assert third.previous_response_id == second.id
