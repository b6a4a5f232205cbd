"""The lazy tool-call grammar on the real demo model, both schedulers with the whole sampling
surface: with tools offered and ``tool_choice="auto"``, the model writes what it would until it
opens a ``<tool_call>``, and from there only calls to the offered tools whose arguments match
their schemas. The oracle: a plain og.Generator loop that applies llguidance's mask to the
logits itself from the token where the marker begins."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest

from backends.chat.parsers import get_tool_parser, tool_specs
from backends.core.service import InferenceService
from backends.types import ChatPrompt
from config.settings import DEMO_MODEL_DIR
from tests.backends.engine.helpers import FULL, config, request, run
from tests.conftest import og_max_length

pytestmark = pytest.mark.model

TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": name,
            "parameters": {
                "type": "object",
                "properties": {key: {"type": "string"}, **extra},
                "required": [key],
            },
        },
    }
    for name, key, extra in (
        ("get_weather", "city", {}),
        ("find_recipe", "dish", {"servings": {"type": "integer"}}),
        ("count_birds", "place", {}),
    )
]
OFFERED = {t["function"]["name"]: t["function"]["parameters"] for t in TOOLS}
ASKS = [
    "What is the weather in Paris?",
    "Find me a recipe for soup.",
    "Read the file notes.txt.",
    "Run the command ls.",
    "Tell me about the river.",  # answered without a call
]
MAX_TOKENS = 60
TRIGGER = "<tool_call>"


def render(messages: list[dict[str, str]]) -> str:
    """The prompt as Hugging Face's apply_chat_template renders it with tools."""
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    env.filters["tojson"] = lambda v, indent=None: json.dumps(v, ensure_ascii=False, indent=indent)
    template = env.from_string((DEMO_MODEL_DIR / "chat_template.jinja").read_text())
    return template.render(messages=messages, tools=TOOLS, add_generation_prompt=True)


def oracle(prompt: str, *, masked: bool) -> list[int]:
    """Greedy tokens from og.Generator; with ``masked``, llguidance's mask of the lazy grammar
    applied to each step's logits once the output holds the marker."""
    import llguidance
    import llguidance.numpy
    import onnxruntime_genai as og

    model = og.Model(str(DEMO_MODEL_DIR))
    tokenizer = og.Tokenizer(model)
    ids = tokenizer.encode(prompt)
    params = og.GeneratorParams(model)
    params.set_search_options(
        max_length=og_max_length(DEMO_MODEL_DIR, len(ids) + MAX_TOKENS), do_sample=False
    )
    gen = og.Generator(model, params)
    gen.append_tokens(ids)
    call = get_tool_parser("hermes").lazy_call_grammar(tool_specs(TOOLS))
    assert call is not None
    eos = [int(t) for t in tokenizer.eos_token_ids]  # the model's end of turn ends a call
    ll_tok = llguidance.LLTokenizer(str(DEMO_MODEL_DIR / "tokenizer.json"), eos_token=eos)
    vocab = len(gen.get_logits().reshape(-1))
    matcher: Any = None
    out: list[int] = []
    while len(out) < MAX_TOKENS:
        if matcher is not None:
            logits = np.array(gen.get_logits(), dtype=np.float32).reshape(1, -1)
            mask = llguidance.numpy.allocate_token_bitmask(1, vocab)
            llguidance.numpy.fill_next_token_bitmask(matcher, mask, 0)
            llguidance.numpy.apply_token_bitmask_inplace(logits, mask)
            gen.set_logits(logits.reshape(1, 1, -1))
        gen.generate_next_token()
        token = int(gen.get_next_tokens()[0])
        if token in tokenizer.eos_token_ids:
            break
        out.append(token)
        if matcher is not None:
            assert matcher.consume_token(token)
        elif masked and TRIGGER in tokenizer.decode(out):
            start = max(i for i in range(len(out)) if TRIGGER in tokenizer.decode(out[i:]))
            matcher = llguidance.LLMatcher(ll_tok, llguidance.grammar_from("lark", call.grammar))
            assert matcher.consume_tokens(out[start:]), matcher.get_error()
        if matcher is not None and matcher.is_stopped():
            break
    return out


def decode(tokens: list[int]) -> str:
    import onnxruntime_genai as og

    return str(og.Tokenizer(og.Model(str(DEMO_MODEL_DIR))).decode(tokens))


def valid(name: str, arguments: str) -> bool:
    """The call names an offered tool and its arguments are what the schema admits."""
    schema = OFFERED.get(name)
    if schema is None:
        return False
    args = json.loads(arguments)
    types = {"string": str, "integer": int}
    return set(schema["required"]) <= set(args) and all(
        key in schema["properties"] and isinstance(v, types[schema["properties"][key]["type"]])
        for key, v in args.items()
    )


@pytest.fixture(scope="module")
def oracles() -> list[tuple[list[int], list[int]]]:
    """Each ask's (unconstrained, masked) greedy tokens."""
    prompts = [render([{"role": "user", "content": ask}]) for ask in ASKS]
    return [(oracle(p, masked=False), oracle(p, masked=True)) for p in prompts]


@pytest.mark.parametrize("strategy", FULL)
def test_auto_calls_keep_to_the_offered_tools(
    strategy: str, oracles: list[tuple[list[int], list[int]]]
) -> None:
    async def body(service: InferenceService) -> list[Any]:
        out = []
        for ask in ASKS:
            prompt = ChatPrompt([{"role": "user", "content": ask}], tools=TOOLS)
            handle = await service.submit(request(prompt, max_tokens=MAX_TOKENS))
            out.append((await handle.result()).choices[0])
        return out

    choices = run(config(scheduler=strategy), body)
    for choice, (free, masked) in zip(choices, oracles, strict=True):
        assert [t.token_id for t in choice.tokens] == masked, (
            decode([t.token_id for t in choice.tokens]),
            decode(masked),
            choice.finish_reason,
        )  # the oracle, token for token
        calls = [(c.name, c.arguments) for c in choice.tool_calls]
        assert all(valid(name, args) for name, args in calls), calls
        if not calls:  # no call opened: nothing was masked
            assert masked == free and choice.finish_reason == "stop"
            continue
        assert choice.finish_reason == "tool_calls"
        # Up to the token that completes the marker, the output is the model's own.
        opened = next(i for i in range(len(masked)) if TRIGGER in decode(masked[: i + 1]))
        assert masked[: opened + 1] == free[: opened + 1]
    # (Unconstrained, the committed demo model names tools it was not offered for some of
    # these asks, e.g. "get_read"; which ones depends on the CPU's float bits, so this test
    # asserts only what holds everywhere: the output is the masked oracle's and valid.)
