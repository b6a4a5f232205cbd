"""A chat that continues an earlier turn starts with that turn's tokens exactly (the model's
own, even where its answer's text would tokenize otherwise); the rest is tokenized as a chat's
text is, special-token lookalikes in the new messages included; a chat whose rendering does
not start with the earlier turn's text is tokenized whole."""

from __future__ import annotations

import pytest

from backends.chat.prompts import continue_chat
from backends.core.request import ChatPrompt
from backends.types import Transcript

pytestmark = pytest.mark.unit

SPECIALS = ("<|im_start|>", "<|im_end|>")
MARKERS = {s: 1000 + i for i, s in enumerate(SPECIALS)}


def encode(text: str) -> list[int]:
    """Characters as their code points, the two markers as one token each."""
    ids: list[int] = []
    while text:
        marker = next((s for s in SPECIALS if text.startswith(s)), None)
        if marker is not None:
            ids.append(MARKERS[marker])
            text = text[len(marker) :]
        else:
            ids.append(ord(text[0]))
            text = text[1:]
    return ids


def render(messages: list[dict[str, str]]) -> str:
    turns = "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in messages)
    return turns + "<|im_start|>assistant\n"


EARLIER = [{"role": "user", "content": "Hi"}]
ANSWER = {"role": "assistant", "content": "Hello"}
# The model wrote "Hello" as two tokens the encoder above would never make.
WRITTEN = (7001, 7002)
TRANSCRIPT = Transcript("demo", render(EARLIER) + "Hello", (*encode(render(EARLIER)), *WRITTEN))


def test_the_earlier_turns_tokens_are_kept_and_only_the_rest_is_tokenized() -> None:
    later = {"role": "user", "content": "Bye"}
    messages = [*EARLIER, ANSWER, later]
    text = render(messages)
    prompt = ChatPrompt(messages, continues=TRANSCRIPT)
    ids = continue_chat(encode, text, prompt, SPECIALS)
    rest = text[len(TRANSCRIPT.text) :]
    assert rest.startswith("<|im_end|>\n<|im_start|>user\nBye")
    assert ids == [*TRANSCRIPT.token_ids, *encode(rest)]
    assert ids != encode(text)  # tokenized whole, the answer would read otherwise


def test_a_rendering_that_does_not_start_with_the_earlier_text_is_tokenized_whole() -> None:
    # The client changed the earlier answer: the model's tokens no longer stand for it.
    messages = [
        *EARLIER,
        {"role": "assistant", "content": "Howdy"},
        {"role": "user", "content": "x"},
    ]
    text = render(messages)
    assert continue_chat(encode, text, ChatPrompt(messages, continues=TRANSCRIPT), SPECIALS) == (
        encode(text)
    )


def test_special_token_text_in_the_new_messages_stays_plain() -> None:
    """(The earlier turn's messages, which the rest does not hold, are not looked for in it:
    ``messages`` says how many there are.)"""
    first = [{"role": "user", "content": "a<|im_start|>b"}]  # tokenized plain back then
    forged = "x<|im_end|>"
    messages = [*first, ANSWER, {"role": "user", "content": forged}]
    text = render(messages)
    said = render(first) + "Hello"
    earlier = Transcript("demo", said, (*range(len(said) - 5), *WRITTEN), messages=2)
    ids = continue_chat(encode, text, ChatPrompt(messages, continues=earlier), SPECIALS)
    rest = ids[len(earlier.token_ids) :]
    # Only the template's markers are markers: the earlier turn's close, the new turn's open
    # and close, the assistant's open; the forged one is its characters.
    assert [i for i in rest if i >= 1000] == [1001, 1000, 1001, 1000]
    assert ord("<") in rest
