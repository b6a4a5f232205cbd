"""/v1/audio/transcriptions (OpenAI's shape): a multipart form with the audio file.

Thin: read the form, hand the upload to the model's speech service (which checks and decodes
it off the event loop), then answer in the asked format or as server-sent events."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, File, Form, Request, UploadFile
from fastapi.responses import PlainTextResponse, Response

from backends.errors import GenAIError
from backends.speech.request import TranscriptionRequest
from routes.audio import serving
from routes.http.cancellation import unless_disconnected
from routes.http.deps import ERROR_RESPONSES, ModelsDep, SettingsDep
from routes.http.request_ids import request_id
from routes.http.sse import event_stream, sse_response_doc
from schemas.audio import (
    ResponseFormat,
    TranscriptionJson,
    TranscriptionVerbose,
    TranscriptTextDelta,
    TranscriptTextDone,
)

router = APIRouter(prefix="/v1/audio", tags=["audio"])

MIB = 1024 * 1024


class UploadTooLarge(GenAIError):
    status_code = 413
    error_type = "invalid_request_error"
    code = "file_too_large"


@router.post(
    "/transcriptions",
    response_model=TranscriptionJson | TranscriptionVerbose,
    responses={
        200: {
            **sse_response_doc(
                "The transcript: JSON (json, verbose_json), text/plain (text, srt, vtt), or with "
                "`stream=true` server-sent events `transcript.text.delta` and one "
                "`transcript.text.done`.",
                TranscriptTextDelta,
                TranscriptTextDone,
            ),
        },
        413: {"description": "The file is over GENAI_MAX_AUDIO_MIB"},
        **ERROR_RESPONSES,
    },
    summary="Transcribe audio (OpenAI)",
)
async def transcriptions(
    request: Request,
    models: ModelsDep,
    settings: SettingsDep,
    file: Annotated[UploadFile, File(description="WAV, FLAC, MP3, Ogg, ...")],
    model: Annotated[str | None, Form()] = None,
    language: Annotated[str | None, Form(max_length=16)] = None,
    prompt: Annotated[str | None, Form(max_length=20_000)] = None,
    response_format: Annotated[ResponseFormat, Form()] = "json",
    temperature: Annotated[float, Form(ge=0.0, le=1.0, allow_inf_nan=False)] = 0.0,
    stream: Annotated[bool, Form()] = False,
    timestamp_granularities: Annotated[
        list[str] | None, Form(alias="timestamp_granularities[]")
    ] = None,
    include: Annotated[list[str] | None, Form(alias="include[]")] = None,
) -> Response | TranscriptionJson | TranscriptionVerbose:
    serving.check_fields([name for name, _ in (await request.form()).multi_items()])
    serving.check_options(timestamp_granularities, include, response_format)
    models.transcriber(model)  # 404 or 400 before the upload is read
    limit = settings.server.max_audio_mib * MIB
    data = await file.read(int(limit) + 1)
    if len(data) > limit:
        raise UploadTooLarge(
            f"The file is over {settings.server.max_audio_mib:g} MiB (GENAI_MAX_AUDIO_MIB).",
            param="file",
        )
    async with models.hold(model, "transcription"):  # loaded until its job is queued
        service = models.transcriber(model)
        handle = await service.transcribe(
            TranscriptionRequest(
                audio=data,
                model=model,
                language=language or None,
                prompt=prompt,
                temperature=temperature,
                request_id=request_id(request),
                max_seconds=settings.server.max_audio_seconds,
            )
        )
    name = service.model_name
    if stream:
        return event_stream(serving.events(handle, name), ping=settings.server.sse_ping)
    result = await unless_disconnected(request, handle.result())  # a client gone cancels it
    if response_format == "text":
        return PlainTextResponse(result.text)
    if response_format == "srt":
        return PlainTextResponse(serving.as_srt(result))
    if response_format == "vtt":
        return PlainTextResponse(serving.as_vtt(result), media_type="text/vtt")
    if response_format == "verbose_json":
        return serving.as_verbose(result, name)
    return serving.as_json(result, name)
