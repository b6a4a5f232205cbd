"""Prompts of a given length in tokens, unique per request (so prefix reuse cannot kick in)."""

from __future__ import annotations

import json
import random
from typing import Any

_WORDS = (
    "the a of to in and is it that for on with as was by at from this be are or have not model "
    "server token request stream answer question cache prompt reply chat user system hello "
    "world time fast slow small large engine thread queue batch latency throughput first last "
    "next word line text code python data value number one two three four five six seven eight "
    "nine ten sun moon star river mountain city house road tree bird fish water fire earth wind"
).split()


def words(n: int, seed: int) -> str:
    rng = random.Random(seed)
    return " ".join(rng.choice(_WORDS) for _ in range(n))


class PromptMaker:
    """Builds chat messages whose rendered prompt has about ``target`` tokens.

    ``tokenizer`` is an ``og.Tokenizer`` (the server's own rendering: model chat template, then
    encode), so the raw loop and peers get exactly the token ids the server sees.
    """

    def __init__(self, tokenizer: Any) -> None:
        self.tok = tokenizer

    def render(self, messages: list[dict[str, str]]) -> list[int]:
        text = self.tok.apply_chat_template(json.dumps(messages), add_generation_prompt=True)
        return [int(t) for t in self.tok.encode(text)]

    def chat(
        self, target: int, seed: int, history: list[dict[str, str]] | None = None
    ) -> tuple[list[dict[str, str]], list[int]]:
        """``history`` + one user message, rendered to about ``target`` new tokens."""
        history = history or []
        before = len(self.render(history)) if history else 0
        n = max(1, target // 2)
        for _ in range(8):  # converge on the word count (tokens per word ~1-2)
            messages = history + [{"role": "user", "content": f"#{seed} " + words(n, seed)}]
            ids = self.render(messages)
            got = len(ids) - before
            if abs(got - target) <= 2:
                break
            n = max(1, round(n * target / max(got, 1)))
        return messages, ids

    def exact(self, target: int, seed: int) -> tuple[list[dict[str, str]], list[int]]:
        """One user message rendering to exactly ``target`` tokens (unique per ``seed``)."""
        for attempt in range(50):
            s = seed * 100 + attempt
            messages, ids = self.chat(target, s)
            n = len(messages[-1]["content"].split()) - 1
            for _ in range(12):  # one word is 1-2 tokens: step towards the target
                if len(ids) == target:
                    return messages, ids
                n += 1 if len(ids) < target else -1
                messages = [{"role": "user", "content": f"#{s} " + words(max(1, n), s)}]
                ids = self.render(messages)
        raise RuntimeError(f"no prompt of exactly {target} tokens found")
