"""Whose a request is: an opaque owner string (the HTTP layer's hash of the API key that let the
request in), or None where no key is asked for.

The HTTP layer sets it once per request, before any door runs (routes/http/auth.py); the cores
read it when they admit work and list it with their in-flight requests, so that a listing or a
cancel can be kept to one owner's requests without every door passing the owner along.
"""

from __future__ import annotations

from contextvars import ContextVar

_owner: ContextVar[str | None] = ContextVar("genai_request_owner", default=None)


def current_owner() -> str | None:
    """The owner of the request being served in this context (None: no keys, or no request)."""
    return _owner.get()


def set_owner(owner: str | None) -> object:
    """Make ``owner`` this context's owner; returns what :func:`reset_owner` takes to undo it."""
    return _owner.set(owner)


def reset_owner(token: object) -> None:
    _owner.reset(token)  # type: ignore[arg-type]
