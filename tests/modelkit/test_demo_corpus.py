"""The demo model's corpus keeps the plain prompts the tests use out of its texts, and its plain
texts end with the end token only after some sentences."""

from __future__ import annotations

import re

import pytest

from modelkit.demo.agent_corpus import (
    FAILED_ANSWERS,
    agent_corpus,
    copy_corpus,
    exec_corpus,
    failed_corpus,
)
from modelkit.demo.corpus import corpus
from modelkit.demo.plain_corpus import PLAIN_PROMPTS, plain_corpus
from modelkit.demo.template import DEMO_TEMPLATE, renderer
from modelkit.demo.train import held_out_of

pytestmark = pytest.mark.unit


def test_no_generated_text_holds_a_held_out_plain_prompt() -> None:
    render = renderer(DEMO_TEMPLATE)
    texts = [p + r for p, r in corpus(render, 1000, 1)]
    texts += [p + r for p, r in agent_corpus(render, 100, 2, (4, 40), 0.25, 7, 28, 0.6)]
    texts += [p + r for p, r in copy_corpus(render, 500, 3, 7, True)]
    texts += plain_corpus(2000, 4)
    found = [(held, t) for t in texts for held in PLAIN_PROMPTS if held in t]
    assert not found, found[:3]


def test_a_corpus_holding_one_is_refused() -> None:
    pairs = [("", "The sky is blue."), ("", f"Oh. {PLAIN_PROMPTS[7]} and then<|im_end|>")]
    with pytest.raises(SystemExit, match=PLAIN_PROMPTS[7]):
        held_out_of(pairs)


def test_a_plain_text_ends_once_after_its_opening_and_two_sentences() -> None:
    for text in plain_corpus(500, 5):
        assert text.endswith("<|im_end|>") and text.count("<|im_end|>") == 1, text
        assert "<|im_start|>" not in text, text
        # the opening line, then at least two sentences of the corpus
        assert len(re.findall(r"[.!?]", text.removesuffix("<|im_end|>"))) >= 2, text


def test_a_failed_calls_answer_copies_nothing_of_its_error() -> None:
    turns = failed_corpus(renderer(DEMO_TEMPLATE), 40, 5, (4, 8), 7, 28, 0.6)
    assert len({prompt for prompt, _ in turns}) == 40
    for prompt, reply in turns:
        error = prompt.rsplit("<tool_response>\n", 1)[1].split("</tool_response>")[0]
        assert reply.removesuffix("<|im_end|>") in FAILED_ANSWERS
        assert any(word in error for word in ("not found", "No such", "does not exist")), error
        assert "</tool_call>" in prompt.rsplit("<tool_response>", 1)[0]  # the call came first


def test_a_commands_result_in_codexs_shape_is_answered_by_its_exit_code() -> None:
    turns = exec_corpus(renderer(DEMO_TEMPLATE), 60, 6, (4, 8), 7, 28, 0.6)
    codes = set()
    for prompt, reply in turns:
        result = prompt.rsplit("<tool_response>\n", 1)[1].split("</tool_response>")[0]
        found = re.fullmatch(
            r"Chunk ID: [0-9a-f]{6}\nWall time: 0\.\d{4} seconds\nProcess exited with code "
            r"(\d+)\nOriginal token count: \d+\nOutput:\n(.*)\n\n",
            result,
            re.DOTALL,
        )
        assert found, result
        code, output = int(found[1]), found[2]
        codes.add(code == 0)
        answer = reply.removesuffix("<|im_end|>")
        if code == 0:  # the output, copied
            assert answer in (f"It says: {output}", f"The output is: {output}"), (answer, output)
        else:  # a short sentence, nothing of the result
            assert answer in FAILED_ANSWERS, (answer, result)
    assert codes == {True, False}
