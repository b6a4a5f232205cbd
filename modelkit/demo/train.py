"""The demo model's short training run: a seeded corpus (modelkit/demo/corpus.py), a BPE tokenizer
trained on it, then a few minutes of AdamW on 2 CPU cores, loss on the replies only.

Deterministic for a seed on one machine (torch's deterministic algorithms, fixed thread count,
no time-based stopping); another CPU kind may differ in the last bits of the floats.
"""

from __future__ import annotations

import math
import os
import random
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from modelkit.demo.agent_corpus import agent_corpus, copy_corpus
from modelkit.demo.corpus import corpus
from modelkit.demo.plain_corpus import PLAIN_PROMPTS, plain_corpus
from modelkit.demo.template import renderer
from modelkit.shapes import arch_config_kwargs
from modelkit.tokenizer import train_chatml_tokenizer

TRAIN_CONVERSATIONS = 12000
AGENT_CONVERSATIONS = 0  # agent-shaped turns (modelkit/demo/agent_corpus.py), PoSE positions
AGENT_LINES = (4, 16)  # lines of instructions in a training agent turn's system prompt
AGENT_MAX_TOKENS = 2048
CONTEXT = 65536  # the positions the agent turns are spread over
HELD_OUT_SEED_OFFSET = 1_000_003  # the check's prompts come from another stream of the corpus
PLAIN_SEED_OFFSET = 3  # the plain texts' stream (the agent turns use seed + 1, copies seed + 2)
MAX_TOKENS = 400  # longer examples (a few long chats) are dropped
BATCH_TOKENS = 4096  # a batch of long agent turns holds fewer of them (8 chats of 400 fit)
KEEP_NEAR = 48  # the last prompt tokens before the reply keep consecutive positions
PROMPT_WEIGHT = 0.1  # prompt tokens teach the language a little; the replies are the task
# Where to train: the build trains on the CPU; "cuda" makes a recipe search minutes on a GPU
# (deterministic there too, but not bit-equal to the CPU's run).
DEVICE = os.environ.get("DEMO_TRAIN_DEVICE", "cpu")


Example = tuple[list[int], int, list[int] | None]  # ids, where the reply starts, position ids


def encode_pairs(tok: Any, pairs: list[tuple[str, str]], limit: int = MAX_TOKENS) -> list[Example]:
    """Each pair as (ids, where the reply starts, None); prompt and reply tokenized apart, as
    the server tokenizes a prompt and the model then writes the reply."""
    out: list[Example] = []
    for prompt, reply in pairs:
        p = tok.encode(prompt, add_special_tokens=False)
        r = tok.encode(reply, add_special_tokens=False)
        if len(p) + len(r) <= limit:
            out.append((p + r, len(p), None))
    return out


def spread_positions(data: list[Example], context: int, seed: int) -> list[Example]:
    """PoSE-style position skips: each example keeps its tokens but its position ids jump
    forward at one or two places in the prompt (never in its last ``KEEP_NEAR`` tokens), so its
    length in positions is drawn log-uniformly up to ``context``: the model learns to find the
    tools and the request at the distances of a long prompt without training on one."""
    rng = random.Random(seed)
    out: list[Example] = []
    for ids, reply_at, _ in data:
        n = len(ids)
        span = int(math.exp(rng.uniform(math.log(n), math.log(context))))
        extra = max(0, span - n)
        last = max(2, reply_at - KEEP_NEAR)
        cuts = sorted(rng.randrange(1, last) for _ in range(rng.randint(1, 2)))
        start = rng.randint(0, extra // 4)
        skips = [start] + [rng.randint(0, extra - start) // len(cuts) for _ in cuts]
        pos, shift, c = [], skips[0], 0
        for i in range(n):
            while c < len(cuts) and i == cuts[c]:
                shift += skips[c + 1]
                c += 1
            pos.append(i + shift)
        out.append((ids, reply_at, pos))
    return out


def _batches(data: list[Example], batch: int, tokens: int, rng: random.Random) -> list[list[int]]:
    """Index batches of similar lengths (less padding), at most ``batch`` examples and
    ``tokens`` tokens each, in a seeded order."""
    order = sorted(range(len(data)), key=lambda i: (len(data[i][0]), i))
    groups: list[list[int]] = [[]]
    for i in order:
        if len(groups[-1]) >= batch or (len(groups[-1]) + 1) * len(data[i][0]) > tokens:
            groups.append([])
        groups[-1].append(i)
    rng.shuffle(groups)
    return groups


def train(
    model: Any,
    data: list[Example],
    *,
    steps: int,
    batch: int,
    lr: float,
    batch_tokens: int = BATCH_TOKENS,
    seed: int,
    pad_id: int,
    log_every: int = 50,
    only: str = "",
    focus: dict[int, list[int]] | None = None,
    focus_weight: float = 1.0,
) -> dict[str, Any]:
    """Train in place (with ``only``, the parameters whose names start with it, the others
    frozen); returns the loss curve: the replies' mean token loss per ``log_every`` steps
    (prompt tokens count too, with weight PROMPT_WEIGHT, but are not in the curve). ``focus``:
    per example, the positions whose tokens weigh ``focus_weight`` in the loss (the deciding
    tokens, modelkit/demo/tune.py)."""
    import torch

    torch.manual_seed(seed)
    torch.set_num_threads(2)
    if DEVICE != "cpu":
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    torch.use_deterministic_algorithms(True, warn_only=DEVICE != "cpu")
    rng = random.Random(seed)
    model.to(DEVICE)
    model.train()
    for name, param in model.named_parameters():
        param.requires_grad_(name.startswith(only))
    trained = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(trained, lr=lr, betas=(0.9, 0.98), weight_decay=0.01)
    warmup = max(1, steps // 20)

    def schedule(step: int) -> float:
        if step < warmup:
            return (step + 1) / warmup
        return 0.05 + 0.95 * 0.5 * (1 + math.cos(math.pi * (step - warmup) / (steps - warmup)))

    sched = torch.optim.lr_scheduler.LambdaLR(opt, schedule)
    groups: list[list[int]] = []
    curve: list[tuple[int, float]] = []
    window: list[float] = []
    start = time.monotonic()
    for step in range(steps):
        if not groups:
            groups = _batches(data, batch, batch_tokens, rng)
        idx = groups.pop()
        width = max(len(data[i][0]) for i in idx)
        ids = torch.full((len(idx), width), pad_id, dtype=torch.long)
        weight = torch.zeros((len(idx), width))
        reply = torch.zeros((len(idx), width))
        mask = torch.zeros((len(idx), width), dtype=torch.long)
        positions = torch.arange(width).repeat(len(idx), 1)
        for row, i in enumerate(idx):
            seq, reply_at, pos = data[i]
            ids[row, : len(seq)] = torch.tensor(seq)
            if pos is not None:
                positions[row, : len(seq)] = torch.tensor(pos)
                positions[row, len(seq) :] = pos[-1] + 1 + torch.arange(width - len(seq))
            mask[row, : len(seq)] = 1
            weight[row, 1 : len(seq)] = PROMPT_WEIGHT
            weight[row, reply_at : len(seq)] = 1.0
            reply[row, reply_at : len(seq)] = 1.0
            for position in (focus or {}).get(i, ()):
                weight[row, position] = focus_weight
        ids, weight, reply = ids.to(DEVICE), weight.to(DEVICE), reply.to(DEVICE)
        mask, positions = mask.to(DEVICE), positions.to(DEVICE)
        logits = model(input_ids=ids, attention_mask=mask, position_ids=positions).logits[:, :-1]
        nll = torch.nn.functional.cross_entropy(
            logits.reshape(-1, logits.shape[-1]), ids[:, 1:].reshape(-1), reduction="none"
        ).view(ids.shape[0], -1)
        w, r = weight[:, 1:], reply[:, 1:]
        total = (nll * w).sum() / w.sum()
        loss = (nll.detach() * r).sum() / r.sum()  # what is logged: the replies' loss
        opt.zero_grad(set_to_none=True)
        total.backward()
        torch.nn.utils.clip_grad_norm_(trained, 1.0)
        opt.step()
        sched.step()
        window.append(float(loss))
        if (step + 1) % log_every == 0 or step + 1 == steps:
            curve.append((step + 1, round(sum(window) / len(window), 4)))
            window = []
            print(
                f"  step {step + 1:5d}/{steps}  loss {curve[-1][1]:.4f}  "
                f"{time.monotonic() - start:6.1f} s",
                flush=True,
            )
    model.to("cpu")
    model.eval()
    model.requires_grad_(True)
    return {"curve": curve, "seconds": round(time.monotonic() - start, 1)}


def write_training_tokenizer(
    template: str,
    vocab_size: int,
    seed: int,
    out_dir: Path,
    special: list[str],
    agent: bool = False,
) -> None:
    """A byte-level BPE trained on the corpus's texts (prompts and replies; with ``agent``, on
    300 agent turns too), with the template."""
    pairs = corpus(renderer(template), 3000, seed)
    if agent:
        pairs += agent_corpus(renderer(template), 300, seed + 7, AGENT_LINES)
    train_chatml_tokenizer([p + r for p, r in pairs], vocab_size, template, out_dir, special)


def held_out(template: str, seed: int, n: int) -> list[tuple[str, str]]:
    return corpus(renderer(template), n, seed + HELD_OUT_SEED_OFFSET)


def held_out_of(pairs: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """``pairs`` themselves, once none contains a plain prompt the tests and the check hold
    out (``PLAIN_PROMPTS``)."""
    for prompt, reply in pairs:
        for held in PLAIN_PROMPTS:
            if held in prompt or held in reply:
                raise SystemExit(f"a training text contains the held-out prompt {held!r}")
    return pairs


def training_data(
    tok: Any,
    template: str,
    *,
    seed: int,
    chat_turns: int,
    agent_turns: int,
    agent_lines: tuple[int, int],
    agent_max_tokens: int,
    copying: float,
    copy_depth: int,
    agent_tools: int,
    made_up: float | None,
    window: int,
    edit: Callable[[list[tuple[str, str]]], list[tuple[str, str]]] = list,
) -> tuple[list[Example], int]:
    """The main phase's examples (chat turns, then agent turns) and how many are agent turns;
    ``edit`` changes the (prompt, reply) pairs before they are tokenized."""
    chats = held_out_of(corpus(renderer(template), chat_turns, seed))
    data = encode_pairs(tok, edit(chats))
    agent = agent_corpus(
        renderer(template), agent_turns, seed + 1, agent_lines, copying, copy_depth, agent_tools,
        made_up,
    )  # fmt: skip
    agent_data = encode_pairs(tok, edit(held_out_of(agent)), agent_max_tokens)
    if not window:  # a sliding window sees no position past its width: nothing to spread
        agent_data = spread_positions(agent_data, CONTEXT, seed)
    return data + agent_data, len(agent_data)


def plain_data(tok: Any, share: float, beside: int, seed: int) -> list[Example]:
    """Plain texts (no template, modelkit/demo/corpus.py) that make ``share`` of a data set with
    ``beside`` other examples, each trained on all its tokens (it starts its own reply)."""
    n = round(beside * share / (1 - share))
    texts = [("", text) for text in plain_corpus(n, seed + PLAIN_SEED_OFFSET)]
    return encode_pairs(tok, held_out_of(texts))


def plain_phase(
    model: Any,
    tok: Any,
    data: list[Example],
    *,
    share: float,
    steps: int,
    lr: float,
    seed: int,
    batch: int,
    batch_tokens: int,
    mlp_only: bool = False,
) -> dict[str, Any]:
    """The last phase: ``steps`` more steps on the main phase's ``data`` with plain texts as
    ``share`` of it, at peak learning rate ``lr`` (warm-up then cosine, fresh AdamW); with
    ``mlp_only``, of the last layer's MLP alone: the attention (the copying) and the embeddings
    stay as the main phase left them. Returns the run (curve, seconds) and how many plain texts
    it had."""
    plain = plain_data(tok, share, len(data), seed)
    print(f"plain phase: {len(plain):,} plain texts beside {len(data):,} turns", flush=True)
    only = f"model.layers.{model.config.num_hidden_layers - 1}.mlp." if mlp_only else ""
    run = train(
        model, data + plain, steps=steps, batch=batch, lr=lr, seed=seed,
        pad_id=tok.pad_token_id, batch_tokens=batch_tokens, only=only,
    )  # fmt: skip
    return {**run, "texts": len(plain)}


def make_trained_hf_folder(
    hf_dir: Path,
    params: dict[str, int],
    template: str,
    special: list[str],
    *,
    seed: int,
    steps: int,
    batch: int = 8,
    lr: float = 5e-3,
    chat_turns: int = TRAIN_CONVERSATIONS,
    agent_turns: int = AGENT_CONVERSATIONS,
    batch_tokens: int = BATCH_TOKENS,
    window: int = 0,
    agent_lines: tuple[int, int] = AGENT_LINES,
    agent_max_tokens: int = AGENT_MAX_TOKENS,
    copying: float = 0.0,
    copy_steps: int = 0,
    copy_depth: int = 5,
    agent_tools: int = 2,
    made_up: float | None = None,
    plain: float = 0.0,
    plain_steps: int = 0,
    plain_lr: float | None = None,
    plain_mlp_only: bool = False,
    keep_main: Path | None = None,
) -> dict[str, Any]:
    """Tokenizer, model and training: the builder's input in ``hf_dir``. Returns the record of
    the run (seed, steps, loss curve, seconds). ``chat_turns`` of the chat corpus, plus
    ``agent_turns`` agent-shaped ones (long system prompts, PoSE positions) when not 0. With
    ``plain``, that share of plain texts: in a last phase of ``plain_steps`` steps at
    ``plain_lr`` (default ``lr``) beside the main phase's turns, training only the last layer's
    MLP with ``plain_mlp_only``, or without ``plain_steps`` among the main phase's turns.
    ``keep_main``: where to save the weights before the last phase too (modelkit/demo/plain_grid.py
    tries other last phases on them)."""
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    hf_dir.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    write_training_tokenizer(
        template, params["vocab_size"], seed, hf_dir, special, agent=agent_turns > 0
    )
    tok = AutoTokenizer.from_pretrained(hf_dir)
    data, agent_count = training_data(
        tok, template, seed=seed, chat_turns=chat_turns, agent_turns=agent_turns,
        agent_lines=agent_lines, agent_max_tokens=agent_max_tokens, copying=copying,
        copy_depth=copy_depth, agent_tools=agent_tools, made_up=made_up, window=window,
    )  # fmt: skip
    mixed = plain_data(tok, plain, len(data), seed) if plain and not plain_steps else []
    data += mixed
    torch.manual_seed(seed)
    sizes: dict[str, Any] = {**params, "vocab_size": len(tok)}
    common: dict[str, Any] = {
        "tie_word_embeddings": True,
        "rms_norm_eps": 1e-5,
        "rope_theta": 10000.0,
        "bos_token_id": tok.bos_token_id,
        "eos_token_id": tok.eos_token_id,
        "pad_token_id": tok.pad_token_id,
    }
    if window:
        from transformers import MistralConfig, MistralForCausalLM

        mistral: dict[str, Any] = arch_config_kwargs("mistral", params) | {"sliding_window": window}
        model: Any = MistralForCausalLM(MistralConfig(**sizes, **common, **mistral))
    else:
        model = LlamaForCausalLM(LlamaConfig(**sizes, **common))
    print(
        f"training: {sum(p.numel() for p in model.parameters()):,} parameters, "
        f"{len(data):,} conversations ({agent_count:,} agent turns, {len(mixed):,} plain texts), "
        f"{steps} steps of at most {batch} turns and {batch_tokens} tokens, seed {seed}",
        flush=True,
    )
    copy_run = None
    if copy_steps:  # copying first: it does not form among the other turns in minutes
        copies = encode_pairs(
            tok,
            held_out_of(
                copy_corpus(
                    renderer(template), copy_steps * 4, seed + 2, copy_depth, made_up is not None
                )
            ),
        )
        print(f"copy phase: {len(copies):,} copy turns, {copy_steps} steps of 16", flush=True)
        copy_run = train(
            model, copies, steps=copy_steps, batch=16, lr=lr, seed=seed,
            pad_id=tok.pad_token_id, batch_tokens=batch_tokens,
        )  # fmt: skip
    run = train(
        model, data, steps=steps, batch=batch, lr=lr, seed=seed, pad_id=tok.pad_token_id,
        batch_tokens=batch_tokens,
    )  # fmt: skip
    last = None
    if plain and plain_steps:
        if keep_main is not None:
            model.save_pretrained(keep_main)
            tok.save_pretrained(keep_main)
        last = plain_phase(
            model, tok, data, share=plain, steps=plain_steps, lr=plain_lr or lr, seed=seed,
            batch=batch, batch_tokens=batch_tokens, mlp_only=plain_mlp_only,
        )  # fmt: skip
    model.save_pretrained(hf_dir)
    tok.save_pretrained(hf_dir)
    return {
        "seed": seed,
        "steps": steps,
        "batch": batch,
        "lr": lr,
        "conversations": len(data),
        "agent_turns": agent_count,
        "batch_tokens": batch_tokens,
        "window": window,
        "agent_lines": list(agent_lines),
        "agent_max_tokens": agent_max_tokens,
        "copying": copying,
        "copy_steps": copy_steps,
        "copy_depth": copy_depth,
        "agent_tools": agent_tools,
        "made_up": made_up,
        "plain": plain,
        "plain_texts": last["texts"] if last else len(mixed),
        "plain_steps": plain_steps,
        "plain_lr": (plain_lr or lr) if last else None,
        "plain_mlp_only": plain_mlp_only,
        "context": params["max_position_embeddings"],
        "copy_curve": copy_run["curve"] if copy_run else None,
        "train_seconds": run["seconds"],
        "total_seconds": round(time.monotonic() - started, 1),
        "loss_curve": run["curve"],
        "plain_curve": last["curve"] if last else None,
        "plain_seconds": last["seconds"] if last else None,
        "final_loss": (last or run)["curve"][-1][1],
    }
