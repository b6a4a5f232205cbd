"""Every request body's strings are Unicode text: a lone surrogate anywhere (a field, a list,
a free-form object's key or value) is refused by the one base class, naming the field; error
bodies that quote a client's string stay sendable."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from schemas.anthropic import MessagesRequest
from schemas.embeddings import EmbeddingRequest, RerankRequest, ScoreRequest
from schemas.errors import error_body
from schemas.ollama import ChatRequest as OllamaChat
from schemas.ollama import EmbedRequest
from schemas.openai import ChatCompletionRequest
from schemas.responses import ResponsesRequest

pytestmark = pytest.mark.unit

CHAT = [{"role": "user", "content": "hi"}]
CASES = [
    (
        ChatCompletionRequest,
        {"messages": [{"role": "user", "content": "a\\ud800"}]},
        "messages.0.content",
        "at character 1",
    ),
    (ChatCompletionRequest, {"messages": CHAT, "user": "\\udfff"}, "user", "U+DFFF"),
    (
        ChatCompletionRequest,
        {"messages": CHAT, "metadata": {"\\ud800": "v"}},
        "metadata",
        "in a key",
    ),
    (
        ChatCompletionRequest,
        {
            "messages": CHAT,
            "tools": [
                {
                    "type": "function",
                    "function": {
                        "name": "f",
                        "parameters": {"properties": {"a": {"description": "\\ud800"}}},
                    },
                }
            ],
        },
        "tools.0.function.parameters.properties.a.description",
        "at character 0",
    ),
    (ResponsesRequest, {"input": "x", "metadata": {"k": "\\ud800"}}, "metadata.k", "U+D800"),
    (
        MessagesRequest,
        {"model": "m", "max_tokens": 1, "messages": [{"role": "user", "content": "\\ud800"}]},
        "messages.0.content",
        "U+D800",
    ),
    (
        OllamaChat,
        {"model": "m", "messages": [{"role": "user", "content": "\\ud800"}]},
        "messages.0.content",
        "U+D800",
    ),
    (EmbedRequest, {"model": "m", "input": ["ok", "\\ud800"]}, "input.1", "U+D800"),
    (EmbeddingRequest, {"input": ["ok", "\\ud800"]}, "input.1", "U+D800"),
    (RerankRequest, {"query": "\\ud800", "documents": ["a"]}, "query", "U+D800"),
    (ScoreRequest, {"text_1": "a", "text_2": ["\\ud800"]}, "text_2.0", "U+D800"),
    (  # a tag no union knows, quoted by pydantic: it must never get to render it
        ChatCompletionRequest,
        {"messages": CHAT, "response_format": {"type": "json_\\ud800"}},
        "response_format.type",
        "at character 5",
    ),
    (
        ChatCompletionRequest,
        {"messages": [{"role": "user", "content": [{"type": "image\\ud800_url"}]}]},
        "messages.0.content.0.type",
        "at character 5",
    ),
]


@pytest.mark.parametrize(("model", "body", "field", "words"), CASES)
def test_a_lone_surrogate_is_refused_where_it_sits(model, body, field, words) -> None:
    """Before any field is validated: the one error, with the place in its context."""
    with pytest.raises(ValidationError) as caught:
        model.model_validate(json.loads(json.dumps(body).replace("\\\\u", "\\u")))
    [error] = caught.value.errors()
    assert error["type"] == "not_unicode" and error["loc"] == ()
    assert error["ctx"]["field"] == field
    assert "lone surrogate" in error["msg"] and words in error["msg"]


def test_paired_surrogates_and_unusual_text_are_text() -> None:
    content = "\\ud83d\\ude00 cafe\\u0301 caf\\u00e9 \\u0000"  # JSON escapes, as sent
    body = '{"messages": [{"role": "user", "content": "' + content + '"}]}'
    parsed = ChatCompletionRequest.model_validate(json.loads(body))
    assert parsed.messages[0].content == "\U0001f600 cafe\u0301 café \x00"


def test_an_error_body_quoting_a_lone_surrogate_can_be_sent() -> None:
    body = error_body("no model '\ud800'", "invalid_request_error", param="x.\udc00")
    assert json.dumps(body, ensure_ascii=False).encode("utf-8")
    assert body["error"]["message"] == "no model '\\ud800'"
    assert body["error"]["param"] == "x.\\udc00"
