"""A door's names for the core's request fields, and the core's errors told in them.

The core names the fields an error is about by its own names (``prompt``, ``max_tokens``,
``guidance``: :class:`backends.errors.Field`); a door says how its protocol calls each one
that it calls otherwise, and wraps its calls into the core in :func:`client_names`, so that
the client reads its own field (``max_completion_tokens``, ``options.num_predict``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

from backends.core.handle import RequestHandle
from backends.core.registry import ModelRegistry
from backends.core.request import ChatPrompt, GenerationRequest, Prompt
from backends.errors import GenAIError
from backends.types import PreparedPrompt

# What every door calls these core fields unless it says otherwise (OpenAI's names).
COMMON: Mapping[str, str] = {
    "guidance": "response_format",
    "adapter": "model",
    "num_beams": "use_beam_search",
    "beam_width": "best_of",
    "template_args": "chat_template_kwargs",
}


@dataclass(frozen=True)
class FieldNames:
    """Core field name → the door's, where they differ; ``""`` where the door has no such
    field (words about it, a :class:`~backends.errors.Aside`, are left out). A dotted core
    name (``speculative.prompt_lookup_max``) keeps its tail after its head's name."""

    names: Mapping[str, str] = field(default_factory=dict)

    def __call__(self, core: str) -> str:
        if core in self.names:
            return self.names[core]
        head, dot, tail = core.partition(".")
        return self.names.get(head, head) + dot + tail


def door_names(prompts: Prompt | list[Prompt], own: Mapping[str, str] | None = None) -> FieldNames:
    """A door's names for a request of ``prompts``: its ``own``, over :data:`COMMON`; a
    chat's prompt is its ``messages``."""
    first = prompts[0] if isinstance(prompts, list) and prompts else prompts
    chat = {"prompt": "messages"} if isinstance(first, ChatPrompt) else {}
    return FieldNames({**COMMON, **chat, **(own or {})})


@contextlib.contextmanager
def client_names(names: FieldNames) -> Iterator[None]:
    """The core's errors raised inside, told in the door's field names."""
    try:
        yield
    except GenAIError as exc:
        raise exc.renamed(names) from None


async def submit(
    models: ModelRegistry, request: GenerationRequest, own: Mapping[str, str] | None = None
) -> RequestHandle:
    """``models.submit(request)``, its errors in the door's names (``own`` over the common)."""
    with client_names(door_names(request.prompts, own)):
        return await models.submit(request)


async def render(
    models: ModelRegistry, request: GenerationRequest, own: Mapping[str, str] | None = None
) -> list[PreparedPrompt]:
    """``models.render(request)``, its errors in the door's names, as :func:`submit`."""
    with client_names(door_names(request.prompts, own)):
        return await models.render(request)
