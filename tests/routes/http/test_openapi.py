"""The API description (/openapi.json): the OpenAI routes and their streams, declared as what they
are (text/event-stream), with every referenced schema present."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

pytestmark = pytest.mark.model


def test_openapi_documents_the_openai_routes(client: TestClient) -> None:
    schema = client.get("/openapi.json").json()
    paths = schema["paths"]
    for path in ("/v1/chat/completions", "/v1/completions", "/generate"):
        responses = paths[path]["post"]["responses"]
        assert {"200", "400", "404", "503"} <= set(responses)
    for path, chunk in (
        ("/v1/chat/completions", "ChatCompletionChunk"),
        ("/v1/completions", "Completion"),
        ("/v1/chat/stream", "StreamToken"),
    ):
        response = paths[path]["post"]["responses"]["200"]
        # A stream is declared as what it is, text/event-stream; its schema is one event's,
        # whose data is JSON: the route's chunk, or an error.
        event = response["content"]["text/event-stream"]["schema"]
        data = event["properties"]["data"]
        if path != "/v1/chat/stream":  # OpenAI's streams end with the literal [DONE]
            data, done = data["anyOf"]
            assert done == {"const": "[DONE]"}
        assert event["required"] == ["data"] and data["contentMediaType"] == "application/json"
        refs_of_data = {ref["$ref"].rsplit("/", 1)[-1] for ref in data["contentSchema"]["anyOf"]}
        assert {chunk, "ErrorResponse"} <= refs_of_data
        assert chunk in response["description"]
    assert "application/json" not in paths["/v1/chat/stream"]["post"]["responses"]["200"]["content"]
    components = schema["components"]["schemas"]
    for name in (
        "StreamToken",
        "StreamDone",
        "ChatCompletionChunk",
        "ChatChunkChoice",
        "ChatDelta",
        "ChatCompletion",
        "ModelList",
    ):
        assert name in components
    refs = set()

    def walk(node) -> None:
        if isinstance(node, dict):
            if "$ref" in node:
                refs.add(node["$ref"].rsplit("/", 1)[-1])
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    delta = {"role", "content", "reasoning_content", "tool_calls"}
    assert set(components["ChatDelta"]["properties"]) == delta
    walk(schema)
    assert refs <= set(components), f"dangling references: {refs - set(components)}"
    assert paths["/v1/models"]["get"] and paths["/v1/models/{model_id}"]["get"]
