"""The core's one check of a client's text: a lone surrogate (any tokenizer) and a NUL
(onnxruntime-genai's, which reads a C string) are found wherever they sit and refused with a
400 naming the field and the place; the tokenizers themselves agree that they cannot read them."""

from __future__ import annotations

import pytest

from backends.core.planning import check_prompt_text
from backends.core.request import GenerationRequest
from backends.errors import InvalidRequest
from backends.text import check_text, find_unreadable, unreadable
from backends.types import ChatPrompt, TextPrompt
from config.settings import DEMO_MODEL_DIR, REPO_ROOT

pytestmark = pytest.mark.unit

SURROGATE, LOW, NUL = "\ud800", "\udfff", "\x00"


@pytest.mark.parametrize(
    ("text", "nul", "at"),
    [
        ("plain", True, None),
        ("café naïve 日本", True, None),  # Unicode text, mixed forms included
        ("cafe\u0301 café", True, None),  # NFD beside NFC
        ("\U0010ffff\ufffe", True, None),  # noncharacters are characters
        (f"ab{SURROGATE}", False, 2),
        (f"{LOW}x", False, 0),
        (f"a{NUL}b", True, 1),
        (f"a{NUL}b", False, None),  # Hugging Face's tokenizers read a NUL
        ("\u00c0\u0080", True, None),  # an overlong NUL's bytes, as characters: text
    ],
)
def test_what_a_tokenizer_cannot_read(text: str, nul: bool, at: int | None) -> None:
    found = unreadable(text, nul=nul)
    assert (found.at if found else None) == at


def test_the_place_is_found_in_nested_values_and_keys() -> None:
    value = {"role": "user", "content": [{"type": "text", "text": "ok"}, {"text": "x" + LOW}]}
    found = find_unreadable(value, nul=True)
    assert found is not None and (found.where, found.at) == ("content.1.text", 1)
    key = find_unreadable({SURROGATE: "v"}, nul=False)
    assert key is not None and key.where == "\\ud800 (a key)"


def test_the_message_names_the_field_the_part_and_the_character() -> None:
    with pytest.raises(InvalidRequest) as caught:
        check_text(["fine", "x" + SURROGATE], "input", nul=False, within="input")
    assert caught.value.param == "input" and caught.value.status_code == 400
    assert caught.value.message == (
        "input holds a lone surrogate (U+D800) at character 1 in input 1: it is not Unicode "
        "text (half of a pair, alone) and cannot be encoded."
    )
    with pytest.raises(InvalidRequest, match="NUL character .U.0000. at character 3"):
        check_text("abc" + NUL, "prompt", nul=True)
    check_text(["fine", {"k": ["v"]}], "input", nul=True)  # nothing to refuse


@pytest.mark.parametrize(
    ("request_", "param", "words"),
    [
        (GenerationRequest(TextPrompt("a" + NUL)), "prompt", "NUL"),
        (
            GenerationRequest(ChatPrompt([{"role": "user", "content": "hi" + SURROGATE}])),
            "prompt",  # the core's name: a chat door calls it messages (routes/door/fields.py)
            "in a user message's content",
        ),
        (
            GenerationRequest(
                ChatPrompt([{"role": "user", "content": "hi"}], tools=[{"name": "f" + NUL}])
            ),
            "tools",
            "in tool 0.name",
        ),
        (
            GenerationRequest(ChatPrompt([{"role": "user", "content": "hi"}]), stop=["ok", LOW]),
            "stop",
            "in stop string 1",
        ),
        (
            GenerationRequest(TextPrompt("x" + SURROGATE)),
            "prompt",
            "lone surrogate (U+D800)",
        ),
    ],
)
def test_the_core_checks_every_text_a_request_carries(
    request_: GenerationRequest, param: str, words: str
) -> None:
    with pytest.raises(InvalidRequest) as caught:
        check_prompt_text(request_)
    assert caught.value.param == param and words in caught.value.message


def test_the_tokenizers_refuse_what_the_check_refuses() -> None:
    """Why the check exists: onnxruntime-genai's tokenizer cannot encode a lone surrogate and
    ends the text at a NUL; Hugging Face's cannot encode a lone surrogate either."""
    import onnxruntime_genai as og
    from tokenizers import Tokenizer

    ort = og.Tokenizer(str(DEMO_MODEL_DIR))  # the tokenizer alone, not the model
    with pytest.raises(TypeError):
        ort.encode("a" + SURROGATE)
    assert list(ort.encode("a" + NUL + "bcdefg")) == list(ort.encode("a"))
    hf = Tokenizer.from_file(
        str(REPO_ROOT / "tests" / "hub_models" / "st-embedder" / "tokenizer.json")
    )
    with pytest.raises(TypeError):
        hf.encode("a" + SURROGATE)
