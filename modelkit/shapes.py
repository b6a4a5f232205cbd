"""The decoder shapes and architectures the kit builds: dimensions (``SHAPES``) and the
transformers classes with what each architecture adds on top (``ARCHS``)."""

from __future__ import annotations

# Llama-shaped configs. "demo" is small enough to commit (< 1 MB); smollm2-135m, llama3.2-1b
# and qwen2.5-0.5b match public models' shapes for realistic speed measurements.
SHAPES: dict[str, dict[str, int]] = {
    "demo": {
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "vocab_size": 1024,
        "max_position_embeddings": 2048,
    },
    # The demo model before the current one (128 wide, full attention, 1,000 steps), and the
    # base of the window experiments in docs/models.md; a 64k context, 1 KiB of KV a token.
    "demo-chat": {
        "hidden_size": 128,
        "intermediate_size": 256,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "vocab_size": 1024,
        "max_position_embeddings": 65536,
    },
    # The committed demo model (models/demo-llama), with --window 512 and its recipe in
    # docs/models.md: twice as wide (1.4M parameters, the same 1 KiB of KV cache a token).
    "demo-chat-256": {
        "hidden_size": 256,
        "intermediate_size": 512,
        "num_hidden_layers": 2,
        "num_attention_heads": 8,
        "num_key_value_heads": 2,
        "vocab_size": 1024,
        "max_position_embeddings": 65536,
    },
    "smollm2-135m": {
        "hidden_size": 576,
        "intermediate_size": 1536,
        "num_hidden_layers": 30,
        "num_attention_heads": 9,
        "num_key_value_heads": 3,
        "vocab_size": 49152,
        "max_position_embeddings": 8192,
    },
    # The copy model a CPU can train (modelkit/copy_model/train.py --shape copy-cpu): four
    # layers for copying whole files, a 4,096-token BPE of code.
    "copy-cpu": {
        "hidden_size": 256,
        "intermediate_size": 768,
        "num_hidden_layers": 4,
        "num_attention_heads": 8,
        "num_key_value_heads": 2,
        "vocab_size": 4096,
        "max_position_embeddings": 4096,
    },
    # Llama-3.2-1B's dimensions (head_dim 2048 / 32 = 64, tied embeddings: make_hf_folder
    # ties every shape) with the 135M shape's vocabulary: the benchmark's real-size shape
    # (bench/harness/model_cache.py builds it with std-0.02 weights, saved as fp16).
    "llama3.2-1b": {
        "hidden_size": 2048,
        "intermediate_size": 8192,
        "num_hidden_layers": 16,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "vocab_size": 49152,
        "max_position_embeddings": 8192,
    },
    "qwen2.5-0.5b": {
        "hidden_size": 896,
        "intermediate_size": 4864,
        "num_hidden_layers": 24,
        "num_attention_heads": 14,
        "num_key_value_heads": 2,
        "vocab_size": 49152,
        "max_position_embeddings": 8192,
    },
}

# Decoder architectures: (transformers config class, model class, extra config kwargs).
# The dimensions come from SHAPES; these kwargs only add what the architecture needs on top.
# "llama" is the historical default and gets no extras (its build is unchanged).
_WINDOW = 64  # small, so a short test prompt already runs past the sliding window
ARCHS: dict[str, tuple[str, str, dict[str, object]]] = {
    "llama": ("LlamaConfig", "LlamaForCausalLM", {}),
    "qwen2": ("Qwen2Config", "Qwen2ForCausalLM", {"use_sliding_window": False}),
    # Qwen3's default head_dim is 128, not hidden/heads; it adds q/k RMSNorm.
    "qwen3": ("Qwen3Config", "Qwen3ForCausalLM", {"use_sliding_window": False, "head_dim": None}),
    # Phi-3 fuses qkv/gate-up projections; max == original max positions selects the plain
    # (not LongRoPE) Phi-3 builder.
    "phi3": ("Phi3Config", "Phi3ForCausalLM", {"original_max_position_embeddings": None}),
    # Mistral slides its window over every layer, but transformers' MistralConfig has no
    # `layer_types`, and without them the builder treats every layer as full attention and
    # drops the window from the export: name every layer a sliding one explicitly.
    "mistral": (
        "MistralConfig",
        "MistralForCausalLM",
        {"head_dim": None, "sliding_window": _WINDOW, "layer_types": "sliding"},
    ),
    # Gemma scales the input embedding by sqrt(hidden_size): with random weights and a tied
    # lm_head the residual stream is dominated by the current token's own embedding and
    # greedy decoding echoes the last prompt token forever. Untied, the output varies.
    "gemma": ("GemmaConfig", "GemmaForCausalLM", {"head_dim": None, "tie_word_embeddings": False}),
    # Gemma-2: alternating sliding/full layers, attention and final logit soft-capping.
    "gemma2": (
        "Gemma2Config",
        "Gemma2ForCausalLM",
        {
            "head_dim": None,
            "tie_word_embeddings": False,
            "query_pre_attn_scalar": None,
            "sliding_window": _WINDOW,
            "attn_logit_softcapping": 50.0,
            "final_logit_softcapping": 30.0,
        },
    ),
}


def arch_config_kwargs(arch: str, params: dict[str, int]) -> dict[str, object]:
    """Config kwargs specific to ``arch``, with placeholders (None) resolved from ``params``."""
    head_dim = params["hidden_size"] // params["num_attention_heads"]
    out: dict[str, object] = {}
    for key, value in ARCHS[arch][2].items():
        if key in ("head_dim", "query_pre_attn_scalar") and value is None:
            value = head_dim
        elif key == "original_max_position_embeddings" and value is None:
            value = params["max_position_embeddings"]
        elif key == "layer_types" and value == "sliding":
            value = ["sliding_attention"] * params["num_hidden_layers"]
        out[key] = value
    return out
