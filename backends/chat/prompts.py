"""From a prompt to what the model reads: a chat rendered with the model's template, then
tokens.

Runs on the owner thread, in the one trip a request makes there, or for a very large prompt in
the prompt worker process (:mod:`backends.chat.prompt_worker`), which has its own tokenizer.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from backends.chat.template import Encode, TemplateSet, encode_chat, render_chat
from backends.errors import InvalidRequest
from backends.models.folder import ModelFolder
from backends.models.loader import LoadedModel, decode_ids
from backends.types import ChatPrompt, ImageInput, PreparedPrompt, Prompt, TextPrompt, TokenPrompt


def templates_of(folder: ModelFolder) -> TemplateSet:
    return TemplateSet(folder.chat_templates, folder.template_tokens)


def prepare_prompt(model: LoadedModel, prompt: Prompt, param: str) -> PreparedPrompt:
    folder = model.folder
    if isinstance(prompt, ChatPrompt) and prompt.images:
        return prepare_with_images(model, prompt, param)
    return render_and_encode(
        model.tokenizer, templates_of(folder), folder.special_tokens, prompt, param
    )


def check_modalities(model_name: str, modalities: Sequence[str], prompt: Prompt) -> None:
    """A 400 naming the model and what it cannot read."""
    if isinstance(prompt, ChatPrompt) and prompt.images and "image" not in modalities:
        param = prompt.images[0].param
        raise InvalidRequest(
            f"The model {model_name!r} does not take images (it reads "
            f"{', '.join(modalities)}); {param} is an image.",
            param=param,
        )


def prepare_with_images(model: LoadedModel, prompt: ChatPrompt, param: str) -> PreparedPrompt:
    """The chat rendered with its image parts, then the model's own processor: the pixels
    and, in the tokens, each image's placeholder expanded to its image tokens. On the owner
    thread (og objects); the images were decoded and checked by the door."""
    images = [image for image in prompt.images if isinstance(image, ImageInput)]
    if len(images) != len(prompt.images):
        raise InvalidRequest("An image of the request was not loaded.", param=param)
    text = render_chat(templates_of(model.folder), prompt)
    try:
        pictures = model.og.Images.open_bytes(*[image.data for image in images])
        inputs = model.processor(text, images=pictures)
    except Exception as exc:  # onnxruntime-genai reports through RuntimeError
        raise InvalidRequest(
            f"The images cannot be prepared for this model: {exc}", param=images[0].param
        ) from None
    ids = [int(t) for t in inputs["input_ids"].as_numpy().ravel()]
    image_tokens = int(inputs["num_image_tokens"].as_numpy().sum())
    digests = tuple(image.digest for image in images)
    return PreparedPrompt(text, ids, inputs, image_tokens, digests)


def render_and_encode(
    tokenizer: Any, templates: TemplateSet, specials: Sequence[str], prompt: Prompt, param: str
) -> PreparedPrompt:
    """The prompt's text and tokens; errors name the prompt ``param``."""

    def encode(text: str) -> list[int]:
        if not text:
            return []
        try:
            return [int(t) for t in tokenizer.encode(text)]
        except (TypeError, ValueError):  # text the core's check (backends/text.py) let through
            raise InvalidRequest(
                ["The ", param, " cannot be tokenized: the model's tokenizer refuses its text."],
                param=param,
            ) from None

    if isinstance(prompt, TokenPrompt):  # the ids were checked against the vocabulary
        return PreparedPrompt(decode_ids(tokenizer, prompt.ids), list(prompt.ids))
    if isinstance(prompt, ChatPrompt):
        text = render_chat(templates, prompt)
        ids = continue_chat(encode, text, prompt, specials)
    else:
        text = prompt.text
        ids = encode(text)
    if not ids:
        raise InvalidRequest("The prompt is empty: it has no tokens.", param=param)
    return PreparedPrompt(text, ids)


def continue_chat(
    encode: Encode, text: str, prompt: ChatPrompt, specials: Sequence[str]
) -> list[int]:
    """The chat's tokens: when it continues an earlier turn whose text the rendering starts
    with, that turn's tokens (prompt and answer exactly as the model read and wrote them, even
    where the answer's text would tokenize otherwise), then the rest; else the whole text."""
    earlier = prompt.continues
    if earlier is None or not text.startswith(earlier.text):
        return encode_chat(encode, text, prompt, specials)
    later = replace(prompt, messages=prompt.messages[earlier.messages :], continues=None)
    return [*earlier.token_ids, *encode_chat(encode, text[len(earlier.text) :], later, specials)]


def prompt_chars(prompt: Prompt) -> int:
    """Characters of what the client sent (the template's own text not counted)."""
    if isinstance(prompt, TextPrompt):
        return len(prompt.text)
    if isinstance(prompt, TokenPrompt):
        return 0  # no text to tokenize: its length is checked in tokens
    content = sum(len(str(m.get("content") or "")) for m in prompt.messages)
    return content + len(json.dumps(list(prompt.tools))) if prompt.tools else content
