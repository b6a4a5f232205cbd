"""OpenAI's audio transcriptions: what the server answers (the request is a multipart form,
declared on the route)."""

from schemas.audio.response import (
    RESPONSE_FORMATS,
    ResponseFormat,
    TranscriptionJson,
    TranscriptionMetrics,
    TranscriptionSegment,
    TranscriptionUsage,
    TranscriptionVerbose,
    TranscriptTextDelta,
    TranscriptTextDone,
    UsageInputDetails,
)

__all__ = [
    "RESPONSE_FORMATS",
    "ResponseFormat",
    "TranscriptTextDelta",
    "TranscriptTextDone",
    "TranscriptionJson",
    "TranscriptionMetrics",
    "TranscriptionSegment",
    "TranscriptionUsage",
    "TranscriptionVerbose",
    "UsageInputDetails",
]
