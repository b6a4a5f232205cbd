"""The demo model's plain texts: text with no chat template, continued for some sentences.

A model trained on ChatML turns alone learns that a user's sentence is followed by
``<|im_end|>``, and so ends a plain prompt ("Write a very long book.") at once. A plain text
opens the way those turns' requests do (a chat question, a request for a tool, an agent's
request, a copy request) or as a document does (a statement, a title, made-up words), then goes
on for two to eight sentences and instruction lines, and only then ends with ``<|im_end|>``.
Trained on all its tokens, it teaches the difference that matters: without ``<|im_start|>``
before it, the same request is text to continue, not a turn to close.

``PLAIN_PROMPTS`` are the plain prompts the tests and the build's check use; no training text
may contain one (modelkit/demo/train.py refuses such a corpus). Same seed, same texts.
"""

from __future__ import annotations

from modelkit.demo.agent_corpus import COPY_ASKS, KINDS
from modelkit.demo.agent_values import CorpusRandom, instruction
from modelkit.demo.corpus import (
    ADJECTIVES,
    FIXED_TOOLS,
    NOUNS,
    generic_tool,
    question,
    sentence,
)

# llama.cpp's server test prompts and a few common openings.
PLAIN_PROMPTS = (
    "Write a very long book.",
    "Write another a poem.",
    "What is LLM?",
    "The sky is blue and I love it.",
    "Write another very long music lyrics.",
    "Write a very long joke.",
    "I believe the meaning of life is",
    "Once upon a time",
    "Hello, my name is",
    "The capital of France is",
)


def opening(rng: CorpusRandom) -> tuple[str, str | None]:
    """A plain text's first line and its topic (or None)."""
    r = rng.random()
    if r < 0.2:
        return question(rng)
    if r < 0.3:  # a request for what a tool does
        tool = rng.choice(FIXED_TOOLS) if rng.random() < 0.7 else generic_tool(rng)
        return tool.ask(rng)[0], None
    if r < 0.45:  # an agent's request
        kind = rng.choice(KINDS)
        return rng.choice(kind.asks).format(v=kind.value(rng)), None
    if r < 0.5:
        return rng.choice(COPY_ASKS).format(v=" ".join(rng.choice(NOUNS) for _ in range(2))), None
    if r < 0.65:
        return sentence(rng), None
    noun = rng.choice(NOUNS)
    if r < 0.75:  # a title, on a line of its own
        title = rng.choice([f"The {rng.choice(ADJECTIVES)} {noun}", f"A story about a {noun}"])
        return title + rng.choice(["\n", "\n\n", ":\n"]), noun
    if r < 0.8:
        return instruction(rng), None
    if r < 0.9:  # an unfinished phrase, as a user starts a story or a sentence
        return fragment(rng), None
    return rng.choice(UNKNOWN).format(w=unknown(rng)), None


# Short words that join an unfinished phrase's others.
JOINS = (
    "a", "an", "the", "of", "on", "in", "at", "to", "and", "is", "was", "my", "your", "we",
    "I", "it", "upon", "when", "there", "once", "with", "for", "from", "by", "as", "be",
)  # fmt: skip


def fragment(rng: CorpusRandom) -> str:
    """Two to six words with no end mark: made-up or corpus words, with short joining words
    between them, the first capitalised as a sentence's."""
    words = []
    for _ in range(rng.randint(2, 6)):
        r = rng.random()
        if r < 0.4:
            words.append(rng.choice(JOINS))
        elif r < 0.7:
            words.append(unknown(rng).split()[0].lower())
        else:
            words.append(rng.choice(NOUNS + ADJECTIVES))
    return words[0][:1].upper() + words[0][1:] + "".join(" " + w for w in words[1:])


# Words the corpus does not know, asked about or written as a user would.
UNKNOWN = (
    "{w}.", "{w}?", "{w}!", "{w}:", "{w}", "What is {w}?", "Who is {w}?", "What is a {w}?",
    "Tell me about {w}.", "Write about {w}.", "Write a {w}.", "The {w} is", "My {w} is",
    "I think {w} is", "Why is {w} so {w}?",
)  # fmt: skip


def unknown(rng: CorpusRandom) -> str:
    """One to three made-up words of four to nine letters, in lower, title or upper case
    (acronyms)."""
    words = []
    for _ in range(rng.randint(1, 3)):
        word = "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(4, 9)))
        words.append(rng.choice([word, word, word.title(), word.upper()[: rng.randint(4, 5)]]))
    return " ".join(words)


def line(rng: CorpusRandom, topic: str | None) -> str:
    """A sentence of the text: mostly the corpus's statements, now and then a question or an
    instruction, so that no kind of line is where a text ends."""
    r = rng.random()
    if r < 0.1:
        asked = question(rng)[0]
        return asked if asked[-1] in ".?!" else sentence(rng, topic)
    if r < 0.2:
        return instruction(rng).removeprefix("- ")
    return sentence(rng, topic)


def plain_text(rng: CorpusRandom) -> str:
    """An opening line, then two to eight lines, then the end token."""
    first, topic = opening(rng)
    body = [line(rng, topic if i == 0 else None) for i in range(rng.randint(2, 8))]
    breaks = "" if first.endswith("\n") else rng.choice([" ", " ", " ", "\n", "\n\n"])
    return first + breaks + rng.choice([" ", "\n"]).join(body) + "<|im_end|>"


def plain_corpus(n: int, seed: int) -> list[str]:
    """``n`` plain texts, their paths and values half made up as the agent turns' are."""
    rng = CorpusRandom(seed, made_up=0.5, depth=7, prefixed=True)
    return [plain_text(rng) for _ in range(n)]


if __name__ == "__main__":
    for text in plain_corpus(12, 0):
        print(repr(text))
