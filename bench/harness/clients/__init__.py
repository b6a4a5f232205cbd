"""One load-generator client per protocol, over one small interface (:class:`Client`):

- ``native``: this server's ``/v1/chat`` and ``/v1/chat/stream`` (:mod:`.native`);
- ``openai``: ``/v1/chat/completions``; ``completions``: ``/v1/completions`` (:mod:`.openai`);
- ``responses``: ``/v1/responses`` (:mod:`.responses`).

:func:`make_client` picks the class by the protocol's name, as the command line gives it.
"""

from __future__ import annotations

from typing import Any

from bench.harness.clients.base import Client, RequestResult, RequestSpec
from bench.harness.clients.native import NativeClient
from bench.harness.clients.openai import ChatClient, CompletionsClient, refuses_min_tokens
from bench.harness.clients.responses import ResponsesClient

CLIENTS: dict[str, type[Client]] = {
    c.protocol: c for c in (NativeClient, ChatClient, CompletionsClient, ResponsesClient)
}


def make_client(url: str, protocol: str = "native", **options: Any) -> Client:
    """The client of ``protocol`` (a key of :data:`CLIENTS`) for the server at ``url``;
    ``options``: the model name, ``min_tokens``, ``timeout``, ``extra`` body fields."""
    return CLIENTS[protocol](url, **options)


__all__ = [
    "CLIENTS",
    "ChatClient",
    "Client",
    "CompletionsClient",
    "NativeClient",
    "RequestResult",
    "RequestSpec",
    "ResponsesClient",
    "make_client",
    "refuses_min_tokens",
]
