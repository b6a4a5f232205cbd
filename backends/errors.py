"""Typed errors. The HTTP layer maps each to a status code and OpenAI's error shape."""

from __future__ import annotations


class GenAIError(Exception):
    """Base class: carries what the error shape needs, nothing HTTP-specific but a status hint."""

    status_code = 500
    error_type = "server_error"
    code: str | None = None

    def __init__(
        self, message: str, *, param: str | None = None, headers: dict[str, str] | None = None
    ) -> None:
        super().__init__(message)
        self.message = message
        self.param = param
        self.headers = headers or {}

    def __reduce__(self) -> tuple[object, ...]:
        # Keyword arguments survive pickling (errors raised in the prompt worker process).
        return (_rebuild, (type(self), self.message, self.param, self.headers))


def _rebuild(
    cls: type[GenAIError], message: str, param: str | None, headers: dict[str, str]
) -> GenAIError:
    return cls(message, param=param, headers=headers)


class InvalidRequest(GenAIError):
    status_code = 400
    error_type = "invalid_request_error"


class ContextLengthExceeded(InvalidRequest):
    code = "context_length_exceeded"


class PayloadTooLarge(InvalidRequest):
    """A part of the request (an image) over a size limit: 413."""

    status_code = 413
    code = "payload_too_large"


class ModelNotFound(GenAIError):
    status_code = 404
    error_type = "invalid_request_error"
    code = "model_not_found"


class NotReady(GenAIError):
    status_code = 503
    error_type = "service_unavailable"
    code = "model_not_ready"


class Overloaded(GenAIError):
    """Too many requests running and waiting: retry later (429 with Retry-After)."""

    status_code = 429
    error_type = "rate_limit_error"
    code = "server_overloaded"


class ShuttingDown(NotReady):
    code = "shutting_down"


class RequestTimedOut(GenAIError):
    status_code = 504
    error_type = "timeout_error"
    code = "request_timeout"


class RequestCancelled(GenAIError):
    """An operator cancelled the request (POST /admin/requests/{id}/cancel)."""

    status_code = 503
    error_type = "service_unavailable"
    code = "request_cancelled"


class GenerationFailed(GenAIError):
    code = "generation_failed"


class GrammarFailed(GenAIError):
    """The request's grammar (a JSON schema, regex, Lark grammar or forced tool calls) failed
    while generating, e.g. llguidance's own limits: the request's doing, not the server's."""

    status_code = 400
    error_type = "invalid_request_error"
    code = "grammar_failed"


class GuidanceError(Exception):
    """Internal: a grammar is invalid, or the model's output left it (the engine raises it)."""


class StartupError(Exception):
    """The server cannot start; the message says why and what to do. No traceback needed."""


class RequestNotFound(GenAIError):
    status_code = 404
    error_type = "invalid_request_error"
    code = "request_not_found"
