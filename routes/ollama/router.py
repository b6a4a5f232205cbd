"""Ollama's native API: /api/chat and /api/generate (JSON lines, streamed by default),
/api/embed and /api/embeddings, the model listings (/api/tags, /api/show, /api/ps), pulling
from the Hugging Face hub and deleting what was pulled (/api/pull, /api/delete: admin actions,
routes/ollama/pull.py), /api/version and the liveness check at /.

Thin: validate, start the generation (errors here still get their status code), then answer
one object or JSON lines. The logic lives in routes/ollama/serving.py and models.py; errors on
/api/* leave in Ollama's shape (routes/ollama/errors.py).
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from contextlib import AbstractAsyncContextManager
from typing import Any

from fastapi import APIRouter, Depends, FastAPI, Request
from fastapi.responses import PlainTextResponse, Response
from fastapi.routing import APIRoute

from routes.door.answer import answer_lines
from routes.door.fields import submit
from routes.door.media import load_media
from routes.http.cancellation import unless_disconnected
from routes.http.deps import ERROR_RESPONSES, ModelsDep, SettingsDep
from routes.http.ndjson import MEDIA_TYPE, NdjsonResponse, ndjson_stream
from routes.http.request_ids import request_id
from routes.ollama import embed as embedding
from routes.ollama import models as listing
from routes.ollama import pull as pulling
from routes.ollama import serving
from routes.ollama.errors import NotHere, OllamaErrors, error_line
from routes.ops.admin import require_admin
from schemas.ollama import (
    ChatRequest,
    DeleteRequest,
    DeleteResponse,
    EmbeddingsRequest,
    EmbeddingsResponse,
    EmbedRequest,
    EmbedResponse,
    GenerateFields,
    GenerateRequest,
    ListResponse,
    OllamaChatResponse,
    OllamaError,
    OllamaGenerateResponse,
    ProcessResponse,
    PullProgress,
    PullRequest,
    ShowRequest,
    ShowResponse,
    VersionResponse,
)
from schemas.ollama.request import keep_alive_seconds

ERRORS: dict[int | str, dict[str, Any]] = {
    status: {**doc, "model": OllamaError} for status, doc in ERROR_RESPONSES.items()
}
RUNNING = "Ollama is running"  # what Ollama answers at /, and clients look for


class AnyContentType(APIRoute):
    """Ollama reads a body as JSON whatever its content type says, and clients rely on it:
    LiteLLM sends none, and ``curl -d``, as in Ollama's own examples, sends
    ``application/x-www-form-urlencoded``. The type is dropped before FastAPI reads the body,
    which it then reads as JSON (``strict_content_type=False``)."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def route(request: Request) -> Response:
            headers = [(k, v) for k, v in request.scope["headers"] if k != b"content-type"]
            return await handler(Request({**request.scope, "headers": headers}, request.receive))

        return route


router = APIRouter(
    prefix="/api", tags=["ollama"], strict_content_type=False, route_class=AnyContentType
)


def _lines_doc(what: str, line: type[Any]) -> dict[int | str, dict[str, Any]]:
    stream = {
        "description": f"{what}. By default (`stream` unset or true) newline-delimited JSON: "
        f"one {line.__name__} a line, the last with `done: true`, the counts and durations. "
        'An error after the stream started is a last line `{"error": "..."}`.',
        "content": {MEDIA_TYPE: {"schema": {"$ref": f"#/components/schemas/{line.__name__}"}}},
    }
    return {200: stream, **ERRORS}


def _checked(body: GenerateFields, models: ModelsDep) -> None:
    service = models.generator(body.model)  # a 404 for an unknown model, 400 another kind
    thinks = service.chat_format.reasoning is not None
    serving.check(body, max_length=service.max_length, thinks=thinks)


def _held(body: GenerateFields, models: ModelsDep) -> AbstractAsyncContextManager[object]:
    """The model, loaded (by this request if need be) and kept until the request is queued;
    ``keep_alive`` says how long it stays after the request."""
    models.generator(body.model)  # a 404 or 400 before anything loads
    return models.hold(body.model, keep_loaded=keep_alive_seconds(body.keep_alive))


@router.post(
    "/chat",
    response_model=OllamaChatResponse,
    response_model_exclude_none=True,
    responses=_lines_doc("The assistant's message", OllamaChatResponse),
    summary="Chat (Ollama)",
)
async def chat(
    body: ChatRequest, models: ModelsDep, request: Request
) -> OllamaChatResponse | NdjsonResponse:
    async with _held(body, models):
        _checked(body, models)
        if not body.messages:
            return serving.loaded_chat(body.model)
        chat = await load_media(request, serving.chat_request(body, request_id(request)))
        handle = await submit(models, chat, serving.FIELDS)
    return await answer_lines(request, serving.CHAT, handle, body, stream=body.stream)


@router.post(
    "/generate",
    response_model=OllamaGenerateResponse,
    response_model_exclude_none=True,
    responses=_lines_doc("The completion", OllamaGenerateResponse),
    summary="Generate (Ollama)",
)
async def generate(
    body: GenerateRequest, models: ModelsDep, request: Request
) -> OllamaGenerateResponse | NdjsonResponse:
    async with _held(body, models):
        _checked(body, models)
        if not body.prompt and not body.images:
            return serving.loaded_generate(body.model)
        completion = await load_media(request, serving.generate_request(body, request_id(request)))
        handle = await submit(models, completion, serving.FIELDS)
    return await answer_lines(request, serving.GENERATE, handle, body, stream=body.stream)


@router.post("/embed", response_model=EmbedResponse, responses=ERRORS, summary="Embed (Ollama)")
async def embed(body: EmbedRequest, models: ModelsDep, request: Request) -> EmbedResponse:
    """Embeddings of a text or texts from an embedding model (L2-normalised), cut to fit
    unless ``truncate`` is false."""
    work = embedding.embed(body, models, request_id(request))
    return await unless_disconnected(request, work)


@router.post("/embeddings", response_model=EmbeddingsResponse, responses=ERRORS)
async def embeddings(
    body: EmbeddingsRequest, models: ModelsDep, request: Request
) -> EmbeddingsResponse:
    """The older embedding route: one prompt's vector (superseded by /api/embed)."""
    work = embedding.embeddings(body, models, request_id(request))
    return await unless_disconnected(request, work)


@router.get("/tags", response_model=ListResponse, responses={401: ERRORS[401]})
async def tags(models: ModelsDep) -> ListResponse:
    """Every served model, in memory or not (pulled ones included), and their adapters."""
    return listing.tags(models)


_ADMIN: dict[int | str, dict[str, Any]] = {
    403: {
        "model": OllamaError,
        "description": "Admin actions are off, or the key is not an admin key",
    }
}


@router.post(
    "/pull",
    response_model=PullProgress,
    response_model_exclude_none=True,
    dependencies=[Depends(require_admin)],
    responses={
        200: {
            "description": "Progress as newline-delimited JSON (`stream` unset or true): "
            "`pulling manifest`, `pulling <digest>` per file with `total` and `completed` "
            "bytes, `verifying sha256 digest`, `writing manifest`, `success`; "
            '`{"error": "..."}` as the last line if it fails. `stream: false`: the last one.',
            "content": {MEDIA_TYPE: {"schema": {"$ref": "#/components/schemas/PullProgress"}}},
        },
        **ERRORS,
        **_ADMIN,
        502: {"model": OllamaError, "description": "`stream: false`: the pull failed"},
    },
    summary="Pull a model from the Hugging Face hub (Ollama)",
)
async def pull(
    body: PullRequest, models: ModelsDep, settings: SettingsDep
) -> PullProgress | NdjsonResponse:
    """Fetch the variant of hub repo ``model`` for this machine into the hub's cache, then
    serve it under that name (loaded on its first request). An admin action."""
    name = pulling.named(body.model_name)
    if body.stream:
        return ndjson_stream(pulling.pull_lines(models, settings, name), error_line)
    return PullProgress(**await pulling.pull_whole(models, settings, name))


@router.delete(
    "/delete",
    response_model=DeleteResponse,
    dependencies=[Depends(require_admin)],
    responses={**ERRORS, **_ADMIN},
    summary="Delete a pulled model (Ollama)",
)
async def delete(body: DeleteRequest, models: ModelsDep, settings: SettingsDep) -> DeleteResponse:
    """Unload a pulled model and remove its files from the hub's cache. An admin action."""
    await pulling.delete(models, settings, pulling.named(body.model_name))
    return DeleteResponse()


@router.post("/show", response_model=ShowResponse, responses=ERRORS)
async def show(body: ShowRequest, models: ModelsDep) -> ShowResponse:
    """A model's details, model_info (from genai_config.json), chat template and
    capabilities; a model not in memory is loaded to read them."""
    async with models.hold(body.model_name, models.served_model(body.model_name).kind):
        return listing.show(models, body.model_name)


@router.get("/ps", response_model=ProcessResponse, responses={401: ERRORS[401]})
async def ps(models: ModelsDep) -> ProcessResponse:
    """The models in memory, with their size, context length and when each is unloaded."""
    return listing.running(models)


@router.get("/version", response_model=VersionResponse, responses={401: ERRORS[401]})
async def version() -> VersionResponse:
    """The Ollama release whose API this server follows."""
    return VersionResponse(version=listing.OLLAMA_VERSION)


# ---- what this server does another way ----------------------------------------------------------
_LOAD_INSTEAD = (
    "serve a model folder (GENAI_MODEL_DIR, or several in GENAI_MODELS_FILE) or load one at "
    "runtime with POST /admin/models"
)
_INSTEAD = {
    "/push": "This server does not push models to a registry.",
    "/create": f"This server does not create models: {_LOAD_INSTEAD}.",
    "/copy": "This server does not copy models: list a folder again under another name in "
    "GENAI_MODELS_FILE.",
}


def _refusal(path: str, method: str) -> None:
    message = _INSTEAD[path]

    async def refuse() -> None:
        raise NotHere(message)

    router.add_api_route(
        path,
        refuse,
        methods=[method],
        responses={400: {"model": OllamaError, "description": message}, 401: ERRORS[401]},
        summary=f"Not supported here: {message}",
    )


for _path in ("/push", "/create", "/copy"):
    _refusal(_path, "POST")


def install(app: FastAPI, *, web_ui: bool) -> None:
    """Mount the door, and Ollama's liveness answer at / where the web playground does not own
    it (where it does, its page answers ``HEAD /`` with a 200 too). Call it after the auth
    middleware is added, so that 401s on /api/* are reshaped too."""
    app.include_router(router)

    async def running() -> PlainTextResponse:
        return PlainTextResponse(RUNNING)

    if not web_ui:
        app.add_api_route("/", running, methods=["GET", "HEAD"], include_in_schema=False)
    app.add_middleware(OllamaErrors)
