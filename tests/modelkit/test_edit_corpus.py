"""The copy model's training turns (modelkit/copy_model/edit_corpus.py): an edit's answer is
the file with exactly the change asked for, a diff's answer is that change as a unified diff
that applies, and the turns are seeded."""

from __future__ import annotations

import difflib
import random
import re

import pytest

from modelkit.copy_model.edit_corpus import COPY_MIX, KINDS, turn, turns

pytestmark = pytest.mark.unit

ASKED = re.compile(r"`(.+?)`.*?`(.+?)`", re.S)


def shown_file(content: str) -> str:
    return content.split(":\n\n", 1)[1].rsplit("\n\n", 1)[0] + "\n"


@pytest.mark.parametrize("seed", range(40))
def test_an_edit_answer_is_the_file_with_the_one_change_asked_for(seed: int) -> None:
    messages, answer = turn("edit", random.Random(seed))
    content = messages[-1]["content"]
    before = shown_file(content)
    old, new = ASKED.findall(content.rsplit("\n", 1)[1])[0]
    assert before.count(old) == 1
    assert answer == before.replace(old, new) != before


@pytest.mark.parametrize("seed", range(40))
def test_a_diff_answer_is_the_change_with_three_lines_of_context(seed: int) -> None:
    messages, answer = turn("diff", random.Random(seed))
    content = messages[-1]["content"]
    before = shown_file(content)
    lines = answer.splitlines(keepends=True)
    assert lines[0].startswith("--- a/") and lines[1].startswith("+++ b/")
    removed = [line[1:] for line in lines[3:] if line.startswith("-")]
    added = [line[1:] for line in lines[3:] if line.startswith("+")]
    assert len(removed) == len(added) == 1
    after = before.replace(removed[0], added[0], 1)
    assert "".join(difflib.unified_diff(
        before.splitlines(keepends=True), after.splitlines(keepends=True),
        lines[0][4:].strip(), lines[1][4:].strip(),
    )) == answer  # fmt: skip


def test_copy_answers_stand_in_the_prompt_and_free_ones_do_not_copy_it() -> None:
    rng = random.Random(3)
    for _ in range(30):
        messages, answer = turn("copy", rng)
        assert answer and answer in messages[-1]["content"]
        messages, answer = turn("free", rng)
        assert answer.splitlines()[-1] not in messages[-1]["content"]
        messages, answer = turn("repeat", rng)
        assert shown_file(messages[-1]["content"]) == answer


def test_turns_are_seeded_and_mixed() -> None:
    assert turns(50, 1) == turns(50, 1) != turns(50, 2)
    with pytest.raises(ValueError, match="unknown kind"):
        turn("poem", random.Random(0))
    assert set(KINDS) == {"edit", "diff", "free", "copy", "repeat"}
    copy_phase = turns(200, 1, COPY_MIX)
    repeats = sum(":\n\n" in m[-1]["content"] and shown_file(m[-1]["content"]) == a
                  for m, a in copy_phase)  # fmt: skip
    assert 100 < repeats < 180  # "repeat" turns, 0.7 of them (and no edit answers the file)
