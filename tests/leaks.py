"""Whether a secret shows in some output: the whole of it, or any piece of it long enough to
narrow a guess (pydantic once printed 22 of a key's 32 characters)."""

from __future__ import annotations

PIECE = 8  # characters: a shorter run could be chance


def leaked(output: str, secret: str, piece: int = PIECE) -> list[str]:
    """The pieces of ``secret`` (``piece`` characters, or the whole when shorter) that
    ``output`` holds."""
    size = min(piece, len(secret))
    pieces = {secret[i : i + size] for i in range(len(secret) - size + 1)}
    return sorted(p for p in pieces if p in output)


def assert_not_leaked(output: str, *secrets: str) -> None:
    for secret in secrets:
        found = leaked(output, secret)
        assert not found, f"{len(found)} piece(s) of a secret in the output"
