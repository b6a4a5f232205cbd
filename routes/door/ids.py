"""The ids a door makes up, every protocol's in one place.

Each prefix carries its protocol's separator: OpenAI's ids are ``chatcmpl-<hex>`` and
``cmpl-<hex>``; Responses' and Anthropic's ``resp_<hex>``, ``msg_<hex>`` and so on.
"""

from __future__ import annotations

import uuid

CHAT_COMPLETION = "chatcmpl-"
COMPLETION = "cmpl-"
RESPONSE = "resp_"
MESSAGE = "msg_"  # a Responses message item, and an Anthropic message
REASONING = "rs_"
FUNCTION_CALL = "fc_"
FUNCTION_CALL_OUTPUT = "fco_"  # a Responses function_call_output item a client sent unnamed
TOOL_USE = "toolu_"

_CORE_CALL = "call_"  # how the core's tool call ids start


def new_id(prefix: str) -> str:
    """A fresh id: ``prefix`` (one of the above) and 32 hex digits."""
    return prefix + uuid.uuid4().hex


def call_id_as(prefix: str, call_id: str) -> str:
    """The core's tool call id under another protocol's prefix (``call_x`` → ``toolu_x``), so
    the same call keeps the same id however it is named."""
    return prefix + call_id.removeprefix(_CORE_CALL)


def template_call_id(prefix: str, call_id: str) -> str:
    """A call id a client sends back under ``prefix``, as the chat template gets it: without
    the prefix (``toolu_a1B2c3D4e`` → ``a1B2c3D4e``), so a Mistral model's 9-character ids
    render again. A core ``call_`` the id lost on the way out is not put back: no template
    needs it (those that read ids compare them with each other or check Mistral's form)."""
    return call_id.removeprefix(prefix)
