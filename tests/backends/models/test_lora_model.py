"""The LoRA test model (tests/models/demo-lora, made by modelkit/adapter.py) on a plain
og.Generator loop, no server: without an adapter it is the plain demo model; each adapter
changes greedy output to exactly what the builder's export with that LoRA baked in produced
(recorded in expected.json); adapters never leak into other generators of the same model."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest

from config.settings import REPO_ROOT

pytestmark = pytest.mark.model

FOLDER = REPO_ROOT / "tests" / "models" / "demo-lora"
ADAPTERS = ("pirate", "poet")
EXPECTED: dict[str, Any] = json.loads((FOLDER / "expected.json").read_text())
PROMPTS: list[str] = EXPECTED["prompts"]
N: int = EXPECTED["max_new_tokens"]


@pytest.fixture(scope="module")
def lora() -> tuple[Any, Any, Any]:
    """One og.Model of the folder, its tokenizer, and og.Adapters with both adapters loaded."""
    import onnxruntime_genai as og

    model = og.Model(str(FOLDER))
    adapters = og.Adapters(model)
    for name in ADAPTERS:
        adapters.load(str(FOLDER / f"{name}.onnx_adapter"), name)
    return model, og.Tokenizer(model), adapters


def start(model: Any, tokenizer: Any, prompt: str, adapters: Any = None, name: str | None = None):
    import onnxruntime_genai as og

    params = og.GeneratorParams(model)
    params.set_search_options(max_length=256, do_sample=False)
    gen = og.Generator(model, params)
    if name is not None:
        gen.set_active_adapter(adapters, name)
    gen.append_tokens(tokenizer.encode(prompt))
    return gen


def step(gen: Any, out: list[int]) -> None:
    gen.generate_next_token()
    out.append(int(gen.get_next_tokens()[0]))


def greedy(
    model: Any, tokenizer: Any, prompt: str, adapters: Any = None, name: str | None = None
) -> list[int]:
    gen = start(model, tokenizer, prompt, adapters, name)
    out: list[int] = []
    while len(out) < N and not gen.is_done():
        step(gen, out)
    return out


def test_folder_is_small_and_complete() -> None:
    sizes = {p.name: p.stat().st_size for p in FOLDER.iterdir()}
    assert {"genai_config.json", "model.onnx", "model.onnx.data", "tokenizer.json"} <= set(sizes)
    assert {f"{name}.onnx_adapter" for name in ADAPTERS} <= set(sizes)
    assert sum(sizes.values()) < 1024 * 1024
    # The chat template is the repo's, as in every other model folder.
    template = (REPO_ROOT / "modelkit" / "chat_template.jinja").read_text()
    assert (FOLDER / "chat_template.jinja").read_text() == template


def test_lora_weights_are_overridable_and_adapters_match_them() -> None:
    """Plain onnxruntime's view: every LoRA weight is an overridable initializer (a graph
    input with a default), and each adapter file sets exactly those, with the same shapes."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.log_severity_level = 3  # one warning per overridable initializer otherwise
    session = ort.InferenceSession(str(FOLDER / "model.onnx"), options)
    graph = {i.name: list(i.shape) for i in session.get_overridable_initializers()}
    assert len(graph) == 2 * 7 * 2  # A and B, 7 linear layers, 2 decoder layers
    assert all(".lora_A." in n or ".lora_B." in n for n in graph)
    for name in ADAPTERS:
        params = ort.AdapterFormat.read_adapter(str(FOLDER / f"{name}.onnx_adapter"))
        values = {k: v.numpy() for k, v in params.get_parameters().items()}
        assert {k: list(v.shape) for k, v in values.items()} == graph
        assert all(v.any() for v in values.values())  # non-zero A and B


def test_without_adapter_equals_the_plain_export(lora: tuple[Any, Any, Any]) -> None:
    # expected.json's base is the plain (LoRA-free) export of the same untrained weights
    # (`build_model.py --shape demo`), which build_adapter.py ran and compared when it built
    # the folder; models/demo-llama is now a trained model, no longer those weights.
    model, tokenizer, _ = lora
    assert [greedy(model, tokenizer, p) for p in PROMPTS] == EXPECTED["base"]


@pytest.mark.parametrize("name", ADAPTERS)
def test_adapter_changes_output_to_the_baked_export(lora: tuple[Any, Any, Any], name: str) -> None:
    model, tokenizer, adapters = lora
    out = [greedy(model, tokenizer, p, adapters, name) for p in PROMPTS]
    assert out == EXPECTED[name]
    for got, base in zip(out, EXPECTED["base"], strict=True):
        assert got[0] != base[0]  # already the first token differs


def test_adapters_differ_from_each_other() -> None:
    pirate, poet = EXPECTED["pirate"], EXPECTED["poet"]
    assert all(a != b for a, b in zip(pirate, poet, strict=True))


def test_alternating_generators_do_not_leak(lora: tuple[Any, Any, Any]) -> None:
    """Generators with and without adapters on one model: one after another, and alive
    together, stepped in turn; each gets exactly its own output."""
    model, tokenizer, adapters = lora
    order: list[str | None] = [None, "pirate", None, "poet", "pirate", None, "poet", None]
    for i, name in enumerate(order):
        prompt = i % len(PROMPTS)
        assert (
            greedy(model, tokenizer, PROMPTS[prompt], adapters, name)
            == (EXPECTED[name or "base"][prompt])
        )
    gens = [
        (i % len(PROMPTS), name, start(model, tokenizer, PROMPTS[i % len(PROMPTS)], adapters, name))
        for i, name in enumerate(order)
    ]
    outs: list[list[int]] = [[] for _ in gens]
    for _ in range(N):
        for (_, _, gen), out in zip(gens, outs, strict=True):
            step(gen, out)
    for (prompt, name, _), out in zip(gens, outs, strict=True):
        assert out == EXPECTED[name or "base"][prompt], name


def test_plain_onnxruntime_run_options_apply_an_adapter() -> None:
    """The same adapter file per run on plain onnxruntime (LoraAdapter + RunOptions), as a
    scheduler on a bare InferenceSession would use it: first greedy tokens as og's."""
    import onnxruntime as ort
    import onnxruntime_genai as og

    config = json.loads((FOLDER / "genai_config.json").read_text())["model"]
    options = ort.SessionOptions()
    options.log_severity_level = 3
    session = ort.InferenceSession(str(FOLDER / "model.onnx"), options)
    tokenizer = og.Tokenizer(str(FOLDER))
    kv_heads, head_size = config["decoder"]["num_key_value_heads"], config["decoder"]["head_size"]
    empty = np.zeros((1, kv_heads, 0, head_size), dtype=np.float32)
    for prompt, text in enumerate(PROMPTS):
        ids = np.asarray([tokenizer.encode(text)], dtype=np.int64)
        feeds: dict[str, np.ndarray] = {"input_ids": ids, "attention_mask": np.ones_like(ids)}
        for layer in range(config["decoder"]["num_hidden_layers"]):
            for kind in ("key", "value"):
                feeds[f"past_key_values.{layer}.{kind}"] = empty
        for name in (None, *ADAPTERS, None):
            run_options = ort.RunOptions()
            if name is not None:
                adapter = ort.LoraAdapter()
                adapter.Load(str(FOLDER / f"{name}.onnx_adapter"))
                run_options.add_active_adapter(adapter)
            logits = session.run(["logits"], feeds, run_options)[0]
            assert int(logits[0, -1].argmax()) == EXPECTED[name or "base"][prompt][0]
