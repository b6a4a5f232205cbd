"""Stored responses on the real demo model: a chain of ``previous_response_id`` turns is the same
conversation sent whole (calls and their outputs included), the chained prompt continues the
earlier turn's tokens, instructions are not carried over, GET / input_items / DELETE, streamed
responses are stored, ``store: false`` keeps nothing, the time to live, and a SQLite file that
survives a restart."""

from __future__ import annotations

import dataclasses
import gc
import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient
from openai.types.responses import Response as SDKResponse
from openai.types.responses import ResponseItemList

from tests.conftest import DirectGenerator, assert_error, make_client, wait_ready
from tests.routes.responses.helpers import WEATHER, calls_of, create, stream, text_of

pytestmark = pytest.mark.model

GREEDY: dict[str, Any] = {"temperature": 0, "max_output_tokens": 8, "min_tokens": 8}
TURNS = ["What is the weather in Paris?", "And in Rome?", "Which one is warmer?"]


@pytest.fixture()
def own_client() -> Iterator[Callable[..., TestClient]]:
    """``make_client`` for a test that needs its own settings; its app (a model, held in
    reference cycles) is collected at the end, not whenever the collector next runs, so that
    several such tests never hold several models at once."""
    yield make_client
    gc.collect()


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def get(client: TestClient, response_id: str, path: str = "", **params: Any) -> Any:
    return client.get(f"/v1/responses/{response_id}{path}", params=params)


def test_a_chain_of_three_turns_is_the_conversation_sent_whole(client: TestClient) -> None:
    chain, previous = [], None
    for text in TURNS:
        link: dict[str, Any] = {"previous_response_id": previous} if previous else {}
        body = create(client, input=text, **GREEDY, **link)
        assert body["previous_response_id"] == previous
        chain.append(body)
        previous = body["id"]
    first, second, third = chain
    whole = create(
        client,
        input=[user(TURNS[0]), *first["output"], user(TURNS[1]), *second["output"], user(TURNS[2])],
        **GREEDY,
    )
    assert text_of(third) and text_of(third) == text_of(whole)
    assert third["usage"]["input_tokens"] == whole["usage"]["input_tokens"]
    assert third["usage"]["output_tokens"] == whole["usage"]["output_tokens"] == 8

    # Its input items: the whole conversation before its output, oldest first with order=asc.
    items = get(client, third["id"], "/input_items", order="asc").json()
    ResponseItemList.model_validate(items)
    kinds = [(i["role"], i["content"][0]["text"]) for i in items["data"]]
    assert kinds == [
        ("user", TURNS[0]),
        ("assistant", text_of(first)),
        ("user", TURNS[1]),
        ("assistant", text_of(second)),
        ("user", TURNS[2]),
    ]
    assert items["data"][1] == first["output"][0], "the output items as they were produced"
    assert len({i["id"] for i in items["data"]}) == 5


def test_a_chain_through_a_call_and_its_output_is_the_conversation_sent_whole(
    client: TestClient,
) -> None:
    ask = {"tools": [WEATHER], "temperature": 0, "max_output_tokens": 60}
    called = create(client, input=TURNS[0], tool_choice="required", **ask)
    [call] = calls_of(called)
    result = {"type": "function_call_output", "call_id": call["call_id"], "output": "sunny, 21C"}
    more = {**ask, "max_output_tokens": 8, "min_tokens": 8}
    chained = create(client, input=[result], previous_response_id=called["id"], **more)
    whole = create(client, input=[user(TURNS[0]), *called["output"], result], **more)
    assert text_of(chained) == text_of(whole)
    assert chained["usage"]["input_tokens"] == whole["usage"]["input_tokens"]
    items = get(client, chained["id"], "/input_items", order="asc").json()
    ResponseItemList.model_validate(items)
    kinds = [i["type"] for i in items["data"]]
    assert kinds == ["message", "function_call", "function_call_output"]
    assert items["data"][1] == call
    # The chained prompt continues the calling turn's tokens exactly, and the engine reuses
    # their KV cache, when the template renders the earlier turn unchanged (the demo model's
    # lists the tools after the conversation: its turns' prompts part there) and writes the
    # call's arguments back with tojson as the model wrote them.
    tools = [{"type": "function", "function": {k: WEATHER[k] for k in ("name", "parameters")}}]
    calling = [user(TURNS[0])]
    answered = [
        *calling,
        {"role": "assistant", "content": "", "tool_calls": [as_chat_call(call)]},
        {"role": "tool", "tool_call_id": call["call_id"], "content": result["output"]},
    ]
    first, second = (
        client.post("/apply-template", json={"messages": m, "tools": tools}).json()["prompt"]
        for m in (calling, answered)
    )
    if second.startswith(first) and call["arguments"] == json.dumps(json.loads(call["arguments"])):
        cached = chained["usage"]["input_tokens_details"]["cached_tokens"]
        usage = called["usage"]
        assert cached >= usage["input_tokens"] + usage["output_tokens"] - 1


def as_chat_call(call: dict[str, Any]) -> dict[str, Any]:
    function = {"name": call["name"], "arguments": call["arguments"]}
    return {"id": call["call_id"], "type": "function", "function": function}


def test_the_chained_prompt_continues_the_earlier_turns_tokens(
    client: TestClient, oracle: DirectGenerator
) -> None:
    """The demo model's template renders the earlier turn's prompt and answer unchanged, so
    the chained prompt starts with the earlier prompt's tokens and the generated ones, and the
    engine reuses their KV cache (``cached_tokens``)."""
    system = "Be brief."
    first = create(client, instructions=system, input=TURNS[0], temperature=0, max_output_tokens=24)
    messages = [{"role": "system", "content": system}, user(TURNS[0])]
    prompt = list(oracle.tokenizer.encode(oracle.chat_prompt(messages)))
    text, generated = oracle.greedy(oracle.chat_prompt(messages), 24)
    assert text_of(first) == text  # the server's greedy answer is the oracle's
    assert first["usage"]["input_tokens"] == len(prompt)

    second = create(
        client,
        instructions=system,
        input=TURNS[1],
        previous_response_id=first["id"],
        temperature=0,
        max_output_tokens=4,
    )
    messages += [{"role": "assistant", "content": text}, user(TURNS[1])]
    chained = list(oracle.tokenizer.encode(oracle.chat_prompt(messages)))
    assert chained[: len(prompt) + len(generated)] == prompt + generated
    assert second["usage"]["input_tokens"] == len(chained)
    cached = second["usage"]["input_tokens_details"]["cached_tokens"]
    # All of it but, when the turn ended at the limit, the last token (never fed).
    assert cached >= len(prompt) + len(generated) - 1


def _split_one(oracle: DirectGenerator, ids: list[int]) -> tuple[int, list[int]] | None:
    """The first of ``ids`` whose text the tokenizer would write as one token but which two
    other tokens also spell: (its index, those two), a tokenization the tokenizer never makes."""
    for i, token in enumerate(ids):
        text = oracle.tokenizer.decode(np.asarray([token], dtype=np.int32))
        if len(text) < 2 or text[0] == " ":
            continue
        pieces = [int(t) for t in oracle.tokenizer.encode(text[0])]
        pieces += [int(t) for t in oracle.tokenizer.encode(text[1:])]
        if len(pieces) == 2 and oracle.tokenizer.decode(np.asarray(pieces, np.int32)) == text:
            return i, pieces
    return None


def test_the_chained_prompt_keeps_the_tokens_the_model_wrote(
    client: TestClient, oracle: DirectGenerator
) -> None:
    """The chained prompt starts with the tokens the earlier turn read and wrote, as they were
    (the stored transcript), not with its answer's text tokenized again: here the answer's
    tokens are rewritten in the store as a spelling the tokenizer never makes, and the chained
    prompt reads that spelling; its greedy answer is the oracle's on those very tokens. A
    transcript of another model is not used."""
    store = client.app.state.responses  # type: ignore[attr-defined]
    first = create(client, input=TURNS[0], temperature=0, max_output_tokens=12)
    kept = store.get(first["id"])
    prompt_tokens = first["usage"]["input_tokens"]
    ids = kept.transcript["ids"]
    assert kept.transcript["model"] == first["model"]
    assert len(ids) == prompt_tokens + first["usage"]["output_tokens"]
    found = _split_one(oracle, ids[prompt_tokens:])
    assert found is not None, f"no answer token of {ids[prompt_tokens:]} has a two-token spelling"
    at, pieces = found
    at += prompt_tokens
    respelled = [*ids[:at], *pieces, *ids[at + 1 :]]
    whole = create(client, input=[user(TURNS[0]), *first["output"], user(TURNS[1])], **GREEDY)

    for model, expected in ((first["model"], respelled), ("another-model", None)):
        transcript = {**kept.transcript, "ids": respelled, "model": model}
        store.put(dataclasses.replace(kept, transcript=transcript))
        chained = create(client, input=TURNS[1], previous_response_id=first["id"], **GREEDY)
        read = store.get(chained["id"]).transcript["ids"][: chained["usage"]["input_tokens"]]
        if expected is None:  # tokenized whole, as the conversation sent whole is
            assert chained["usage"]["input_tokens"] == whole["usage"]["input_tokens"]
            assert text_of(chained) == text_of(whole)
            continue
        assert read[: len(expected)] == expected
        assert chained["usage"]["input_tokens"] == whole["usage"]["input_tokens"] + 1
        text, _ = oracle.greedy(read, 8, 8)
        assert text_of(chained) == text


def test_instructions_are_not_carried_over(client: TestClient) -> None:
    first = create(client, instructions="Answer like a pirate.", input=TURNS[0], **GREEDY)
    assert first["instructions"] == "Answer like a pirate."
    chained = create(client, input=TURNS[1], previous_response_id=first["id"], **GREEDY)
    assert chained["instructions"] is None
    history = [user(TURNS[0]), *first["output"], user(TURNS[1])]
    without = create(client, input=history, **GREEDY)
    with_them = create(client, input=history, instructions="Answer like a pirate.", **GREEDY)
    assert chained["usage"]["input_tokens"] == without["usage"]["input_tokens"]
    assert with_them["usage"]["input_tokens"] > without["usage"]["input_tokens"]
    assert text_of(chained) == text_of(without)


def test_a_response_comes_back_as_it_was_answered(client: TestClient) -> None:
    body = create(client, input=TURNS[0], metadata={"k": "v"}, **GREEDY)
    got = get(client, body["id"])
    assert got.status_code == 200
    assert got.json() == body
    SDKResponse.model_validate(got.json())


def test_a_streamed_response_is_stored_when_it_ends(client: TestClient) -> None:
    events = stream(client, input=TURNS[0], **GREEDY)
    final = events[-1]["response"]
    assert final["store"] is True
    assert get(client, final["id"]).json() == final
    chained = create(client, input=TURNS[1], previous_response_id=final["id"], **GREEDY)
    assert chained["usage"]["input_tokens"] > final["usage"]["input_tokens"]


def test_input_items_come_a_page_at_a_time(client: TestClient) -> None:
    first = create(client, input=[user(t) for t in TURNS], **GREEDY)
    newest = get(client, first["id"], "/input_items").json()  # desc by default
    assert [i["content"][0]["text"] for i in newest["data"]] == TURNS[::-1]
    one = get(client, first["id"], "/input_items", order="asc", limit=1).json()
    assert one["has_more"] is True and one["first_id"] == one["last_id"]
    rest = get(client, first["id"], "/input_items", order="asc", after=one["last_id"]).json()
    assert rest["has_more"] is False
    assert [i["content"][0]["text"] for i in one["data"] + rest["data"]] == TURNS
    refused: list[tuple[dict[str, Any], str]] = [
        ({"limit": 0}, "limit"),
        ({"limit": 101}, "limit"),
        ({"order": "sideways"}, "order"),
        ({"after": "msg_nope"}, "after"),
    ]
    for params, param in refused:
        err = assert_error(get(client, first["id"], "/input_items", **params), 400)
        assert param in (err["param"] or "")


def test_input_items_honour_before_and_both_spellings_of_include(client: TestClient) -> None:
    """before (the page just before an item) and include[] (the openai SDK's spelling) were
    silently ignored."""
    first = create(client, input=[user(t) for t in TURNS], **GREEDY)
    asc = get(client, first["id"], "/input_items", order="asc").json()["data"]
    ids = [i["id"] for i in asc]
    page = get(client, first["id"], "/input_items", order="asc", before=ids[-1], limit=1).json()
    assert [i["id"] for i in page["data"]] == ids[-2:-1]
    assert page["has_more"] is (len(ids) > 2)
    whole = get(client, first["id"], "/input_items", order="asc", before=ids[-1]).json()
    assert [i["id"] for i in whole["data"]] == ids[:-1] and whole["has_more"] is False
    assert_error(get(client, first["id"], "/input_items", before="msg_nope"), 400, "before")
    asked = "message.input_image.image_url"
    for name in ("include", "include[]"):
        got = get(client, first["id"], "/input_items", order="asc", **{name: asked})
        assert got.status_code == 200 and got.json()["data"] == asc
        err = assert_error(get(client, first["id"], "/input_items", **{name: "nonsense"}), 400)
        assert name in (err["param"] or "") and "nonsense" not in (err["param"] or "")


def test_delete_removes_it_and_a_second_delete_is_404(client: TestClient) -> None:
    body = create(client, input=TURNS[0], **GREEDY)
    gone = client.delete(f"/v1/responses/{body['id']}")
    assert gone.status_code == 200
    assert gone.json() == {"id": body["id"], "object": "response", "deleted": True}
    assert_error(get(client, body["id"]), 404)
    assert_error(get(client, body["id"], "/input_items"), 404)
    assert_error(client.delete(f"/v1/responses/{body['id']}"), 404)
    err = assert_error(
        client.post(
            "/v1/responses", json={"input": "x", "previous_response_id": body["id"], **GREEDY}
        ),
        400,
        param="previous_response_id",
    )
    assert err["code"] == "previous_response_not_found"


def test_store_false_keeps_nothing(client: TestClient) -> None:
    body = create(client, input=TURNS[0], store=False, **GREEDY)
    assert body["store"] is False
    err = assert_error(get(client, body["id"]), 404)
    assert body["id"] in err["message"]
    streamed = stream(client, input=TURNS[0], store=False, **GREEDY)[-1]["response"]
    assert_error(get(client, streamed["id"]), 404)
    # A response that continues a stored one may itself be kept or not.
    kept = create(client, input=TURNS[0], **GREEDY)
    chained = create(client, input=TURNS[1], previous_response_id=kept["id"], store=False, **GREEDY)
    assert chained["previous_response_id"] == kept["id"]
    assert_error(get(client, chained["id"]), 404)


def test_an_unknown_id_is_404_in_the_one_shape(client: TestClient) -> None:
    assert_error(get(client, "resp_unknown"), 404)
    assert_error(client.delete("/v1/responses/resp_unknown"), 404)
    assert_error(get(client, "resp_x", stream="true"), 400, param="stream")


def test_a_response_expires_after_its_time_to_live(own_client: Callable[..., TestClient]) -> None:
    with own_client(responses_ttl=1.0) as short:
        wait_ready(short)
        body = create(short, input=TURNS[0], **GREEDY)
        assert get(short, body["id"]).status_code == 200
        time.sleep(1.2)
        assert_error(get(short, body["id"]), 404)
        resp = short.post(
            "/v1/responses", json={"input": "x", "previous_response_id": body["id"], **GREEDY}
        )
        assert_error(resp, 400, param="previous_response_id")


def test_a_response_too_large_to_store_says_so(own_client: Callable[..., TestClient]) -> None:
    with own_client(responses_max_mib=0.001) as small:  # 1 KiB: one response's JSON is more
        wait_ready(small)
        body = create(small, input=TURNS[0], **GREEDY)
        assert body["store"] is False
        assert_error(get(small, body["id"]), 404)
        final = stream(small, input=TURNS[0], **GREEDY)[-1]["response"]
        assert final["store"] is False


def test_a_sqlite_file_keeps_them_across_a_restart(
    tmp_path: Path, own_client: Callable[..., TestClient]
) -> None:
    db = tmp_path / "responses.db"
    with own_client(responses_db=db) as before:
        wait_ready(before)
        first = create(before, input=TURNS[0], **GREEDY)
        chained = create(before, input=TURNS[1], previous_response_id=first["id"], **GREEDY)
        items = get(before, chained["id"], "/input_items").json()
    del before
    gc.collect()  # the first server's model, before the second one loads
    with own_client(responses_db=db) as after:
        wait_ready(after)
        assert get(after, first["id"]).json() == first
        assert get(after, chained["id"], "/input_items").json() == items
        third = create(after, input=TURNS[2], previous_response_id=chained["id"], **GREEDY)
        assert third["previous_response_id"] == chained["id"]
        assert third["usage"]["input_tokens"] > chained["usage"]["input_tokens"]
