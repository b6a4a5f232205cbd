"""Issue 37's hostile requests, one probe each, parametrized over the doors they concern: the
status and the words each must get. tests/test_hostile.py sends them all to one live server
serving the six model kinds; each probe is a request a test client can replay.

Bodies are sent as bytes: a lone surrogate cannot be encoded by a client's JSON encoder, so
it goes as the JSON escape ``\\ud800`` (what ``json.dumps`` writes), or raw as the three bytes
of its UTF-8-like encoding."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import httpx

SURROGATE = "\ud800"
MIB = 1024 * 1024
CAP = 25_000_000  # GENAI_MAX_IMAGE_PIXELS' default


@dataclass(frozen=True)
class Probe:
    id: str
    send: Callable[[httpx.Client], httpx.Response] = field(repr=False)
    status: int
    words: tuple[str, ...] = ()  # in the error message (or, for a 200, in the body)
    param: str | None = None  # the error's param, on the doors whose shape has one
    absent: tuple[str, ...] = ()  # never in the message


JSON = {"content-type": "application/json"}


def post_json(path: str, body: Any) -> Callable[[httpx.Client], httpx.Response]:
    """POST ``body`` (or what a callable ``body`` makes, built only when sent: some are
    megabytes) as JSON, a lone surrogate as its escape (``json.dumps`` is ASCII)."""
    return lambda c: c.post(path, content=json.dumps(made(body)).encode(), headers=JSON)


def post_bytes(path: str, body: Any, raw: bytes) -> Callable[[httpx.Client], httpx.Response]:
    """POST ``body`` as JSON with its ``#`` replaced by ``raw`` bytes."""
    data = json.dumps(body).encode().replace(b"#", raw, 1)
    return lambda c: c.post(path, content=data, headers=JSON)


def made(body: Any) -> Any:
    return body() if callable(body) else body


def message_of(resp: httpx.Response) -> tuple[str, str | None]:
    """The error's message and param in any door's shape (OpenAI's, Anthropic's, Ollama's)."""
    body = resp.json()
    error = body.get("error")
    if isinstance(error, str):  # Ollama
        return error, None
    return str(error.get("message")), error.get("param")


# ---- 1. text no tokenizer reads, on every door ---------------------------------------------
def chat(text: Any, model: str = "demo") -> dict[str, Any]:
    return {"model": model, "max_tokens": 2, "messages": [{"role": "user", "content": text}]}


def text_doors(text: str) -> list[tuple[str, str, dict[str, Any], str | None]]:
    """(name, path, body, the param an error names) for every route where ``text`` enters."""
    msgs = [{"role": "user", "content": text}]
    return [
        ("chat.completions", "/v1/chat/completions", chat(text), "messages.0.content"),
        ("completions", "/v1/completions", {"model": "demo", "prompt": text}, "prompt"),
        ("responses", "/v1/responses", {"model": "demo", "input": text}, None),
        ("messages", "/v1/messages", {"model": "demo", "max_tokens": 2, "messages": msgs}, None),
        ("count_tokens", "/v1/messages/count_tokens", {"model": "demo", "messages": msgs}, None),
        ("native chat", "/v1/chat", chat(text), "messages.0.content"),
        ("native stream", "/v1/chat/stream", chat(text), "messages.0.content"),
        ("generate", "/generate", {"model": "demo", "prompt": text}, "prompt"),
        ("tokenize", "/tokenize", {"model": "demo", "prompt": text}, "prompt"),
        ("apply-template", "/apply-template", {"model": "demo", "messages": msgs}, None),
        ("ollama chat", "/api/chat", {"model": "demo", "messages": msgs, "stream": False}, None),
        ("ollama generate", "/api/generate", {"model": "demo", "prompt": text}, None),
        ("ollama embed", "/api/embed", {"model": "embedder", "input": text}, None),
        ("ollama embeddings", "/api/embeddings", {"model": "embedder", "prompt": text}, None),
        ("embeddings", "/v1/embeddings", {"model": "embedder", "input": text}, "input"),
        ("rerank query", "/v1/rerank", {"query": text, "documents": ["d"]}, "query"),
        ("rerank documents", "/v1/rerank", {"query": "q", "documents": ["d", text]}, None),
        ("rerank alias", "/rerank", {"query": "q", "documents": [text]}, None),
        ("v2 rerank", "/v2/rerank", {"query": "q", "documents": [{"text": text}]}, None),
        ("score", "/v1/score", {"text_1": "q", "text_2": [text]}, "text_2.0"),
        ("score alias", "/score", {"text_1": text, "text_2": "d"}, "text_1"),
    ]


def surrogate_probes() -> list[Probe]:
    probes = []
    for name, path, body, param in text_doors("ok " + SURROGATE + " ok"):
        words = ("lone surrogate (U+D800)", "at character 3")
        probes.append(Probe(f"surrogate/{name}", post_json(path, body), 400, words, param))
    cesu = b"\xed\xa0\x80"  # the surrogate's three bytes, raw in the body
    raw = [text_doors("#")[0], text_doors("#")[14]]  # chat.completions, embeddings
    for name, path, body, param in raw:
        probe = Probe(f"raw surrogate bytes/{name}", post_bytes(path, body, cesu), 400)
        probes.append(replace(probe, words=("lone surrogate (U+D800)",), param=param))
    return probes


def nul_probes() -> list[Probe]:
    """A NUL: refused where onnxruntime-genai's tokenizer reads the text (it would end there),
    read where Hugging Face's does (the encoder doors)."""
    probes = []
    for name, path, body, _ in text_doors("a\x00b"):
        encoder = path in ("/api/embed", "/api/embeddings", "/v1/embeddings") or "rerank" in path
        encoder = encoder or "score" in path
        status, words = (200, ()) if encoder else (400, ("NUL character (U+0000)",))
        probes.append(Probe(f"nul/{name}", post_json(path, body), status, words))
    return probes


def text_probes() -> list[Probe]:
    mixed = "Cafe\u0301 Caf\u00e9 \ufb01ne \u212b \u00c0\u0080"  # NFD, NFC, NFKC, Latin-1
    return [
        *surrogate_probes(),
        *nul_probes(),
        Probe("mixed forms/chat.completions", post_json("/v1/chat/completions", chat(mixed)), 200),
        Probe(
            "mixed forms/embeddings",
            post_json("/v1/embeddings", {"model": "embedder", "input": mixed}),
            200,
        ),
        Probe(
            "overlong bytes/chat.completions",
            post_bytes("/v1/chat/completions", chat("a#b"), b"\xc0\x80"),  # NUL, overlong
            400,
            ("error parsing the body",),
        ),
    ]


# ---- 2. memory bounded by settings ---------------------------------------------------------
def words_of(chars: int) -> str:
    words = "river mountain city light stream answer question model token small large "
    return (words * (chars // len(words) + 1))[:chars]


def memory_probes() -> list[Probe]:
    def huge(**fields: Any) -> Callable[[], dict[str, Any]]:
        return lambda: {"model": "embedder", "input": words_of(15 * MIB), **fields}

    long_ = words_of(500_000)

    def many() -> dict[str, Any]:
        return {"query": "q", "documents": [words_of(30_000)] * 500, "truncate": True}

    refused = "Input 0 has 500000 characters"
    return [
        Probe(
            "15 MiB input, truncate/embeddings",
            post_json("/v1/embeddings", huge(truncate=True)),
            200,
            ('"prompt_tokens":64',),
        ),
        Probe(
            "15 MiB input/ollama embed",
            post_json("/api/embed", huge()),
            200,
            ('"prompt_eval_count":64',),
        ),
        Probe(
            "500 KB input, no truncation/embeddings",
            post_json("/v1/embeddings", {"model": "embedder", "input": long_}),
            400,
            (refused,),
            "input",
        ),
        Probe(
            "500 KB input, no truncation/ollama embed",
            post_json("/api/embed", {"model": "embedder", "input": long_, "truncate": False}),
            400,
            (refused,),
        ),
        Probe("500 documents of 30 KB, truncate/rerank", post_json("/v1/rerank", many), 200),
        Probe(
            "500 KB document, no truncation/rerank",
            post_json("/v1/rerank", {"query": "q", "documents": [long_]}),
            400,
            ("Document 0 with the query has 500001 characters",),
            "documents",
        ),
    ]


# ---- 3. the inconsistencies ------------------------------------------------------------------
def strictness_probes() -> list[Probe]:
    embed = {"model": "embedder", "input": "hi"}
    ref = {"$ref": "#"}
    openai_fmt = {"type": "json_schema", "json_schema": {"name": "s", "schema": ref}}
    responses_fmt = {"format": {"type": "json_schema", "name": "s", "schema": ref}}
    hi = [{"role": "user", "content": "hi"}]
    no_output = ("no output can match it",)
    mismatch = {"text_1": ["a", "b"], "text_2": ["c", "d", "e"]}
    cases: list[tuple[str, str, dict[str, Any], tuple[str, ...], str | None]] = [
        ("unknown field/embeddings", "/v1/embeddings", {**embed, "foo": 1}, ("Extra",), "foo"),
        (
            "dimensions true",
            "/v1/embeddings",
            {**embed, "dimensions": True},
            ("integer",),
            "dimensions",
        ),
        (
            'dimensions "8"',
            "/v1/embeddings",
            {**embed, "dimensions": "8"},
            ("integer",),
            "dimensions",
        ),
        (
            "token ids [true, false]",
            "/v1/embeddings",
            {**embed, "input": [True, False]},
            ("token ids (integers)",),
            "input",
        ),
        (
            "unknown field/rerank",
            "/v1/rerank",
            {"query": "q", "documents": ["d"], "foo": 1},
            ("Extra",),
            "foo",
        ),
        (
            "unknown field/score",
            "/v1/score",
            {"text_1": "q", "text_2": "d", "foo": 1},
            ("Extra",),
            "foo",
        ),
        (
            "length mismatch/score",
            "/v1/score",
            mismatch,
            ("text_1 has 2 texts and text_2 3",),
            "text_2",
        ),
        (
            "$ref #/ollama chat",
            "/api/chat",
            {"model": "demo", "messages": hi, "format": ref, "stream": False},
            no_output,
            None,
        ),
        (
            "$ref #/ollama generate",
            "/api/generate",
            {"model": "demo", "prompt": "hi", "format": ref, "stream": False},
            no_output,
            None,
        ),
        (
            "$ref #/chat.completions",
            "/v1/chat/completions",
            {**chat("hi"), "response_format": openai_fmt},
            no_output,
            "response_format",
        ),
        (
            "$ref #/responses",
            "/v1/responses",
            {"model": "demo", "input": "hi", "text": responses_fmt},
            no_output,
            "text.format",
        ),
    ]
    return [
        Probe(name, post_json(path, body), 400, words, param, ("Value error",))
        for name, path, body, words, param in cases
    ]


def stored_probes() -> list[Probe]:
    """input_items' before and include[] on a stored response with three input items."""

    def stored(c: httpx.Client) -> tuple[str, list[str]]:
        items = [{"role": "user", "content": t} for t in ("one", "two", "three")]
        body = {"model": "demo", "input": items, "max_output_tokens": 2}
        rid = c.post("/v1/responses", json=body).json()["id"]
        listed = c.get(f"/v1/responses/{rid}/input_items", params={"order": "asc"}).json()
        return rid, [i["id"] for i in listed["data"]]

    def before(c: httpx.Client) -> httpx.Response:
        rid, ids = stored(c)
        params: dict[str, str | int] = {"order": "asc", "before": ids[2], "limit": 1}
        got = c.get(f"/v1/responses/{rid}/input_items", params=params)
        assert [i["id"] for i in got.json()["data"]] == [ids[1]], got.text
        return got

    def include(value: str) -> Callable[[httpx.Client], httpx.Response]:
        def send(c: httpx.Client) -> httpx.Response:
            rid, _ = stored(c)
            return c.get(f"/v1/responses/{rid}/input_items", params={"include[]": value})

        return send

    return [
        Probe("before/input_items", before, 200),
        Probe("include[] known/input_items", include("message.input_image.image_url"), 200),
        Probe("include[] unknown/input_items", include("nonsense"), 400, ("include[]",)),
    ]
