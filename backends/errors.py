"""Typed errors. The HTTP layer maps each to a status code and OpenAI's error shape."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Self


class Field(str):
    """A request field, by the core's name (``prompt``, ``max_tokens``, ``guidance``), where an
    error names it: as its ``param`` or a part of its message. A door tells the client the
    field by its own name (:meth:`GenAIError.renamed`); plain strings stay as they are."""

    __slots__ = ()


class Aside(str):
    """Words of a message that need a field (``", or ask for truncation ({})"``, the field by
    its core name in the braces): a door says them with its own name for the field, or leaves
    them out where it has no such field (its name for it is ``""``)."""

    words: str
    field: str

    def __new__(cls, words: str, field: str) -> Aside:
        self = super().__new__(cls, words.format(field))
        self.words, self.field = words, field
        return self

    def __reduce__(self) -> tuple[object, ...]:
        return (Aside, (self.words, self.field))

    def told(self, name: Callable[[str], str]) -> str:
        own = name(self.field)
        return self.words.format(own) if own else ""


class GenAIError(Exception):
    """Base class: carries what the error shape needs, nothing HTTP-specific but a status hint.

    ``message`` is a string, or the parts of one, some of them :class:`Field` names (or
    :class:`Aside` words about one)."""

    status_code = 500
    error_type = "server_error"
    code: str | None = None

    def __init__(
        self,
        message: str | Sequence[str],
        *,
        param: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        self.parts = (message,) if isinstance(message, str) else tuple(message)
        self.message = "".join(self.parts)
        super().__init__(self.message)
        self.param = param
        self.headers = headers or {}

    def renamed(self, name: Callable[[str], str]) -> Self:
        """This error with each :class:`Field` it names (its ``param``, parts of its message)
        as ``name`` calls it, and each :class:`Aside` told with that name: how a door tells
        it in its own protocol's field names."""
        marked = (Field, Aside)
        if not isinstance(self.param, Field) and not any(isinstance(p, marked) for p in self.parts):
            return self
        parts = [_told(p, name) for p in self.parts]
        param = name(self.param) if isinstance(self.param, Field) else self.param
        return type(self)(parts, param=param, headers=self.headers)

    def __reduce__(self) -> tuple[object, ...]:
        # Keyword arguments survive pickling (errors raised in the prompt worker process).
        return (_rebuild, (type(self), self.parts, self.param, self.headers))


def _told(part: str, name: Callable[[str], str]) -> str:
    if isinstance(part, Aside):
        return part.told(name)
    return name(part) if isinstance(part, Field) else part


def _rebuild(
    cls: type[GenAIError], parts: Sequence[str], param: str | None, headers: dict[str, str]
) -> GenAIError:
    return cls(parts, param=param, headers=headers)


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
