"""The demo model's deciding tokens win by a margin well above what moves between CPU kinds.

Where the demo's turns decide a test or a documented example (the agent CLIs' calls and
answers, the README's curls, the playground's first message), the token that closes a copied
argument, the tokens that close the call and the end of the turn each lead the runner-up by at
least ``BOUND`` logits (modelkit/demo/margins.py), on this machine's int4 kernels and on the
other int4 kernel path (tests/kernel_variants.py); and where what an answer says decides
(after a failed command: a short sentence, not the result's header copied back), the greedy
answer is one the case allows. Logits move by up to about 1.2 between two
CPU kinds' kernels, so a verdict that holds here by that margin holds on them too."""

from __future__ import annotations

from pathlib import Path

import pytest

from config.settings import DEMO_MODEL_DIR
from modelkit.demo.margins import (
    BOUND,
    CASES,
    answered,
    deciding,
    margins,
    table,
    value_quotes,
)
from modelkit.demo.tune import EOT, first_sentence
from tests.kernel_variants import NOISE, other_kernels


@pytest.mark.unit
def test_the_bound_is_well_above_the_kernel_noise() -> None:
    assert BOUND >= NOISE + 0.5


@pytest.mark.model
@pytest.mark.parametrize("kernels", ["own", "other"])
def test_every_deciding_token_leads_by_the_bound(kernels: str, tmp_path: Path) -> None:
    folder = DEMO_MODEL_DIR if kernels == "own" else other_kernels(DEMO_MODEL_DIR, tmp_path)
    outcomes = margins(folder)
    assert [o.case for o in outcomes] == [c.name for c in CASES]
    low = [
        f"{o.case}: {d.kind} {d.margin:.2f} at {d.text!r}"
        for o in outcomes
        for d in o.decisions
        if d.margin < BOUND
    ]
    assert not low, "\n".join(low) + "\n\n" + table(outcomes)
    # Each case was decided: its calls closed, its turn ended; the right call was measured.
    for o, case in zip(outcomes, CASES, strict=True):
        kinds = {d.kind for d in o.decisions}
        assert "end" in kinds and ("quote" in kinds or case.call is None), o
        # and where what it says matters, it says what the case allows
        assert answered(o, case), (o.text, case.answers)


@pytest.mark.unit
def test_the_deciding_tokens_of_a_call_and_of_an_answer() -> None:
    pieces = ["<tool_call>", '\n{"name": "f", "arguments": {"', "cmd", '": "', "echo", ' hi"', "}}"]
    pieces += ["\n</", "tool_call>", ""]
    found = deciding(pieces, ended=9)
    # the value's closing quote (not the key's), every token that closes the call, the end
    assert found == [("quote", 5), ("close", 6), ("close", 7), ("close", 8), ("end", 9)]
    assert deciding(["Hi", "."], ended=None) == [("end", -1)]  # a turn that did not end
    assert deciding(["<tool_call>", '{"name": "f", "arguments": {"a": "x'], 1)[-2:] == [
        ("close", -1),  # a call that did not close
        ("end", 1),
    ]


@pytest.mark.unit
def test_escaped_quotes_and_keys_are_not_a_values_end() -> None:
    body = '{"name": "f", "arguments": {"a": "say \\"hi\\"", "b": "c"}}'
    first = body.index('\\"", ') + 2  # after the escaped quote, the value's own
    assert value_quotes(body) == [first, body.index('c"') + 1]
    assert value_quotes('{"name": "f"}') == []  # no arguments, no quotes to decide


@pytest.mark.unit
def test_the_last_phase_cuts_chat_answers_to_one_sentence_only() -> None:
    chat = ("<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n", "The a is b. A c can d.")
    after_result = (
        "<|im_start|>user\n<tool_response>\nx\n</tool_response><|im_end|>\n",
        "Done. The a is b. A c can d.",
    )
    call = ("<|im_start|>user\nRun ls.<|im_end|>\n", '<tool_call>\n{"name": "ls"}\n</tool_call>')
    cut = first_sentence([(p, r + EOT) for p, r in (chat, after_result, call)])
    assert [r for _, r in cut] == [
        "The a is b." + EOT,
        "Done. The a is b. A c can d." + EOT,  # repeats the tool's result: kept whole
        call[1] + EOT,
    ]
