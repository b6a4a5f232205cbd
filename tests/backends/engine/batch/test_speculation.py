"""N-gram speculation in the batch engine, on fp32 test models (where a multi-token verify
run and one-token decode steps give the same logits, so outputs must match exactly): greedy
output against a plain og.Generator loop, and every sampling feature with speculation on
against the same request with it off. Each check also proves drafts were both accepted and
rejected, so both paths ran."""

from __future__ import annotations

import asyncio
import json
import logging
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from backends.config import Limits, ModelConfig, ServiceConfig
from backends.core.handle import Result
from backends.core.service import InferenceService
from backends.engine.batch import speculation, speculation_policy
from backends.engine.batch.prefill_policy import PrefillPolicy
from config.settings import REPO_ROOT
from tests.backends.engine.batch.test_architectures import og_greedy
from tests.backends.engine.batch.test_strategy import cancel_one_among
from tests.backends.engine.helpers import request, run, text

pytestmark = pytest.mark.model

MODELS = REPO_ROOT / "tests" / "models"
DEMO = MODELS / "demo-fp32"  # the trained demo model in fp32: it copies from its context
QWEN2 = MODELS / "qwen2-fp32"  # random weights, full attention: its drafts miss
EOS = 2
ASKS = [
    "Repeat exactly: /data/notes-1/notes/test_moon_search_door7/data/notes/app.txt",
    "Echo back: cat /tests/data-71/project/repo/token.txt && echo two check",
    "Copy this: /lib/repo/tmp-for-ci/test_wind_test_model6/notes-88/todo.toml",
    "Say exactly this: uname -a && ls -la /work-for-root/repo/data-for-root",
    "Tell me about the river and the mountain.",
]


def chat(ask: str) -> str:
    return f"<|im_start|>user\n{ask}<|im_end|>\n<|im_start|>assistant\n"


PROMPTS = [chat(ask) for ask in ASKS]
# Past the demo model's 512-token window: verify runs cross it.
LONG = chat("Repeat exactly: " + " ".join(f"/src/module_{i}/file_{i}.py" for i in range(80)))


def spec_config(path: Path, k: int, **kw: Any) -> ServiceConfig:
    model = ModelConfig(
        path,
        device="cpu",
        intra_op_threads=1,
        scheduler="batch",
        cache_sequences=0,
        prefix_share_min=0,
        speculative_tokens=k,
        max_length=kw.pop("max_length", None),
        prefill_chunk=kw.pop("prefill_chunk", 256),
        step_tokens=kw.pop("step_tokens", 0),
        prefill_overlap=kw.pop("prefill_overlap", True),
    )
    return ServiceConfig(model, Limits(**kw))


@pytest.fixture(autouse=True)
def every_row_drafts(monkeypatch: pytest.MonkeyPatch) -> None:
    """Verify runs cost nothing here: every row drafts all it may, however many decode and
    however its drafts fared, so every path runs."""
    monkeypatch.setattr(speculation_policy, "best_draft", lambda p, rows, most, *costs: most)


@pytest.fixture
def drafts(caplog: pytest.LogCaptureFixture) -> Any:
    """``drafts()``: tokens drafted and accepted so far, from the engine's log lines."""
    caplog.set_level(logging.INFO, logger="genai.batch")

    def counts() -> tuple[int, int]:
        found = [
            re.search(r"drafted (\d+) tokens, accepted (\d+)", r.getMessage())
            for r in caplog.records
        ]
        hits = [m for m in found if m]
        return sum(int(m[1]) for m in hits), sum(int(m[2]) for m in hits)

    return counts


def both_paths(drafted: int, accepted: int) -> None:
    assert 0 < accepted < drafted, (drafted, accepted)


async def answer(service: InferenceService, prompt: Any, delay: float = 0.0, **kw: Any) -> Result:
    await asyncio.sleep(delay)
    return await (await service.submit(request(prompt, **kw))).result()


def answers(cfg: ServiceConfig, prompts: list[Any], together: bool, **kw: Any) -> list[Result]:
    async def body(service: InferenceService) -> list[Result]:
        if together:
            runs = [answer(service, p, 0.002 * i, **kw) for i, p in enumerate(prompts)]
            return list(await asyncio.gather(*runs))
        return [await answer(service, p, **kw) for p in prompts]

    return list(run(cfg, body))


def ids(result: Result) -> list[int]:
    return [t.token_id for t in result.choices[0].tokens]


def on_and_off(path: Path, prompts: list[Any], together: bool = False, **kw: Any) -> Any:
    on = answers(spec_config(path, 8), prompts, together, **kw)
    off = answers(spec_config(path, 0), prompts, together, **kw)
    return on, off


def test_greedy_equals_og_generator(drafts: Any) -> None:
    prompts = [*PROMPTS, LONG]
    expected, lengths = og_greedy(DEMO, prompts, 80)
    assert max(lengths) > 600
    cfg = spec_config(DEMO, 8)
    alone = [text(r) for r in answers(cfg, prompts, together=False, max_tokens=80)]
    assert alone == expected
    both_paths(*drafts())
    together = [text(r) for r in answers(cfg, prompts, together=True, max_tokens=80)]
    assert together == expected


@pytest.mark.parametrize(
    "feeding",
    [
        {"step_tokens": 24, "prefill_overlap": False},
        {"prefill_overlap": True},
        {"prefill_overlap": "auto"},
    ],
    ids=["prefill-beside-each-step", "prefill-overlapping-steps", "prefill-policy"],
)
def test_newcomers_prefilled_beside_verify_runs_change_nothing(
    feeding: dict[str, Any], drafts: Any
) -> None:
    """Prompts arrive while others verify drafts: their chunks run on the worker thread
    beside the decode and verify runs (each step, or across steps), in rows of their own;
    with the prefill policy (the default), in the step or overlapping, as it plans."""
    prompts = [*PROMPTS, LONG, *PROMPTS]
    expected, _ = og_greedy(DEMO, prompts, 60)
    cfg = spec_config(DEMO, 8, prefill_chunk=32, **feeding)
    got = answers(cfg, prompts, together=True, max_tokens=60)
    assert [text(r) for r in got] == expected
    assert drafts()[1] > 0


def test_the_prefill_policy_counts_prompt_reads_only(
    monkeypatch: pytest.MonkeyPatch, drafts: Any
) -> None:
    """A verify run feeds several tokens too, but it is no prompt read: the policy's costs
    of reading a prompt see the prompts' tokens and nothing else."""
    read: list[int] = []
    prefilled = PrefillPolicy.prefilled

    def spy(policy: PrefillPolicy, tokens: int, seconds: float, *, beside: bool) -> None:
        read.append(tokens)
        prefilled(policy, tokens, seconds, beside=beside)

    monkeypatch.setattr(PrefillPolicy, "prefilled", spy)
    cfg = spec_config(DEMO, 8, prefill_chunk=32, prefill_overlap="auto")
    got = answers(cfg, [*PROMPTS, *PROMPTS], together=True, max_tokens=40)
    assert drafts()[1] > 0
    assert sum(read) == sum(r.usage.prompt_tokens for r in got)


@pytest.mark.parametrize("overlap", [False, True], ids=["alone", "beside-prefill"])
def test_the_strategy_times_steps_and_verify_runs_for_the_rule(
    overlap: bool, monkeypatch: pytest.MonkeyPatch, drafts: Any
) -> None:
    """The rule's costs come from the engine's own runs: every batched decode step and
    every verify run is timed, by its rows and its drafted tokens, unless a prompt chunk
    shares the threads with it."""
    steps: list[int] = []
    verifies: list[int] = []
    stepped, verified = speculation_policy.Costs.stepped, speculation_policy.Costs.verified

    def step_spy(costs: speculation_policy.Costs, rows: int, seconds: float) -> None:
        assert seconds > 0
        steps.append(rows)
        stepped(costs, rows, seconds)

    def verify_spy(costs: speculation_policy.Costs, k: int, seconds: float) -> None:
        assert seconds > 0
        verifies.append(k)
        verified(costs, k, seconds)

    monkeypatch.setattr(speculation_policy.Costs, "stepped", step_spy)
    monkeypatch.setattr(speculation_policy.Costs, "verified", verify_spy)
    cfg = spec_config(DEMO, 8, prefill_chunk=32, prefill_overlap=overlap)
    got = answers(cfg, PROMPTS, together=overlap, max_tokens=40)
    drafted, _ = drafts()
    assert drafted == sum(r.usage.drafted_tokens for r in got)  # each verify run counted
    assert steps and verifies and max(verifies) <= 8
    if overlap:  # some runs had a chunk in flight beside them: not timed
        assert 0 < sum(verifies) < drafted and max(steps) > 1
    else:  # one at a time, nothing beside: every run timed
        assert sum(verifies) == drafted and set(steps) == {1}


def test_usage_counts_the_verify_run_a_sequence_ends_in(monkeypatch: pytest.MonkeyPatch) -> None:
    """A token taken from a verify run may end the sequence (EOS, a stop, ``max_tokens``)
    before the run is settled: its usage counts that run too, as the server's totals do."""
    settled: list[int] = []
    settle = speculation.Speculation.settle

    def spy(spec: Any, seq: Any, drafted: int, accepted: int) -> None:
        settled.append(drafted)
        settle(spec, seq, drafted, accepted)

    monkeypatch.setattr(speculation.Speculation, "settle", spy)
    got = answers(spec_config(DEMO, 8), PROMPTS, together=False, max_tokens=40)
    assert sum(r.usage.drafted_tokens for r in got) == sum(settled) > 0
    assert sum(r.usage.verify_runs for r in got) == len(settled)


def test_drafts_that_miss_change_nothing(drafts: Any) -> None:
    """A random-weight model (full attention) writes nothing it has seen: every draft
    misses, and the output is still og.Generator's."""
    prompts = ["fire water the a of to " * 12, "one two three four five one two three four"]
    expected, _ = og_greedy(QWEN2, prompts, 60)
    got = answers(spec_config(QWEN2, 8), prompts, together=True, max_tokens=60)
    assert [text(r) for r in got] == expected
    assert drafts()[0] > 0


@pytest.mark.parametrize("together", [False, True], ids=["alone", "together"])
def test_seeded_sampling_is_the_same_on_and_off(together: bool, drafts: Any) -> None:
    kw: dict[str, Any] = {"max_tokens": 60, "temperature": 0.7, "top_k": 40, "top_p": 0.95}
    on, off = [], []
    for seed in range(3):
        got = on_and_off(DEMO, PROMPTS, together, seed=seed, **kw)
        on += [ids(r) for r in got[0]]
        off += [ids(r) for r in got[1]]
    assert on == off
    assert len({tuple(x) for x in on}) > len(PROMPTS)  # the seeds made a difference
    both_paths(*drafts())


@pytest.mark.parametrize(
    "sampling",
    [
        {"presence_penalty": 0.5, "frequency_penalty": 0.3},
        {"repetition_penalty": 1.3},
        {"logit_bias": {5: 3.0, 17: -2.0, 300: 2.5}},
        {"min_new_tokens": 30, "logit_bias": {EOS: 6.0}},
        {"repetition_penalty": 1.2, "temperature": 0.8, "seed": 3},
    ],
    ids=["penalties", "repetition", "logit-bias", "min-tokens", "sampled-repetition"],
)
def test_sequence_state_sees_only_accepted_tokens(sampling: dict[str, Any], drafts: Any) -> None:
    on, off = on_and_off(DEMO, PROMPTS, max_tokens=60, **sampling)
    assert [ids(r) for r in on] == [ids(r) for r in off]
    assert [r.choices[0].finish_reason for r in on] == [r.choices[0].finish_reason for r in off]
    drafted, accepted = drafts()
    assert accepted > 0


def test_min_tokens_then_eos_cuts_the_block(drafts: Any) -> None:
    """EOS, made likely and held back for ``min_new_tokens``, comes in the middle of a
    block: the answer ends exactly there, as without speculation."""
    kw: dict[str, Any] = {"max_tokens": 80, "logit_bias": {EOS: 40.0}}
    for n in (5, 11, 23):
        on, off = on_and_off(DEMO, PROMPTS[:3], min_new_tokens=n, **kw)
        assert [ids(r) for r in on] == [ids(r) for r in off]
        assert {len(ids(r)) for r in on} == {n}
        assert {r.choices[0].finish_reason for r in on} == {"stop"}
    assert drafts()[1] > 0


def test_json_schema_is_the_same_on_and_off(drafts: Any) -> None:
    schema = {
        "type": "object",
        "properties": {"path": {"type": "string"}, "lines": {"type": "array"}},
        "required": ["path", "lines"],
    }
    guidance = ("json_schema", json.dumps(schema))
    samplings: list[dict[str, Any]] = [{}, {"temperature": 0.8, "seed": 11}]
    for sampling in samplings:
        on, off = on_and_off(DEMO, PROMPTS, max_tokens=60, guidance=guidance, **sampling)
        assert [ids(r) for r in on] == [ids(r) for r in off]
        for r in on:
            if r.choices[0].finish_reason == "stop":
                json.loads(text(r))
    assert drafts()[1] > 0


def test_stop_strings_and_max_tokens_cut_a_block_exactly(drafts: Any) -> None:
    [plain] = answers(spec_config(DEMO, 0), PROMPTS[:1], together=False, max_tokens=80)
    copied = text(plain)
    assert len(copied) > 40, copied
    for at in (6, 17, 31):
        stop = copied[at : at + 4]
        on, off = on_and_off(DEMO, PROMPTS[:1], max_tokens=80, stop=[stop])
        assert (text(on[0]), ids(on[0])) == (text(off[0]), ids(off[0]))
        assert text(on[0]) == copied[: copied.index(stop)]
        assert on[0].choices[0].stop_sequence == stop
    for n in (1, 2, 3, 9, 17):
        on, off = on_and_off(DEMO, PROMPTS, max_tokens=n)
        assert [ids(r) for r in on] == [ids(r) for r in off]
        assert {r.choices[0].finish_reason for r in on[:4]} == {"length"}
    assert drafts()[1] > 0


def test_the_context_end_cuts_a_block_exactly(drafts: Any) -> None:
    import onnxruntime_genai as og

    tokenizer = og.Tokenizer(str(DEMO))
    for prompt in PROMPTS[:4]:
        room = len(tokenizer.encode(prompt)) + 13
        on = answers(spec_config(DEMO, 8, max_length=room), [prompt], False, max_tokens=None)
        off = answers(spec_config(DEMO, 0, max_length=room), [prompt], False, max_tokens=None)
        assert ids(on[0]) == ids(off[0])
        assert on[0].choices[0].finish_reason == "length"
        assert on[0].usage.prompt_tokens + on[0].usage.completion_tokens == room
    assert drafts()[1] > 0


def test_logprobs_come_from_each_verified_position(drafts: Any) -> None:
    on, off = on_and_off(DEMO, PROMPTS, max_tokens=50, logprobs=True, top_logprobs=3)
    for a, b in zip(on, off, strict=True):
        assert ids(a) == ids(b)
        for x, y in zip(a.choices[0].tokens, b.choices[0].tokens, strict=True):
            assert x.logprob is not None and y.logprob is not None
            assert x.logprob.logprob == pytest.approx(y.logprob.logprob, abs=1e-4)
            assert [t.token_id for t in x.top_logprobs] == [t.token_id for t in y.top_logprobs]
    both_paths(*drafts())


def test_rejected_positions_are_never_read(monkeypatch: pytest.MonkeyPatch, drafts: Any) -> None:
    """After every verify run, the positions past what the row counts (those a rejected
    draft token wrote) are set to NaN: the output is still the oracle's."""
    from backends.engine.batch.strategy import BatchStrategy

    verify = BatchStrategy._verify

    def poisoned(self: BatchStrategy, seq: Any, draft: list[int], timed: bool = False) -> None:
        verify(self, seq, draft, timed)
        start, end = len(seq.tokens), len(seq.tokens) + len(draft) + 1
        for buffer in (*self.kv.keys, *self.kv.values):
            buffer[seq.row, :, start:end] = np.nan

    monkeypatch.setattr(BatchStrategy, "_verify", poisoned)
    expected, _ = og_greedy(DEMO, PROMPTS, 60)
    got = answers(spec_config(DEMO, 8), PROMPTS, together=True, max_tokens=60)
    assert [text(r) for r in got] == expected
    both_paths(*drafts())


def test_n_choices_each_keep_their_seeded_draws(drafts: Any) -> None:
    kw: dict[str, Any] = {"max_tokens": 40, "temperature": 0.9, "seed": 5, "n": 3}
    on, off = on_and_off(DEMO, PROMPTS[:3], **kw)
    for a, b in zip(on, off, strict=True):
        assert [c.text for c in a.choices] == [c.text for c in b.choices]
    assert drafts()[1] > 0


def test_a_cancel_mid_block_leaves_the_others_exact(drafts: Any) -> None:
    expected, _ = og_greedy(DEMO, PROMPTS, 60)
    got, finish, made = run(spec_config(DEMO, 8), cancel_one_among(PROMPTS, 60, LONG, 400))
    assert got == expected
    assert finish == "cancelled" and made < 400
    assert drafts()[1] > 0


def test_group_query_attention_verifies_several_tokens_over_a_past_only_at_batch_1() -> None:
    """Why a drafting row is verified in a run of its own: onnxruntime's CPU attention op
    refuses two rows of several new tokens each over a past (and takes one row of them, or
    two rows of one). If a later onnxruntime lifts this, drafting rows can share one run."""
    import onnxruntime as ort

    config = json.loads((QWEN2 / "genai_config.json").read_text())["model"]["decoder"]
    session = ort.InferenceSession(str(QWEN2 / "model.onnx"), providers=["CPUExecutionProvider"])

    def feeds(rows: int, new: int, past: int) -> dict[str, Any]:
        shape = (rows, config["num_key_value_heads"], 64, config["head_size"])
        out: dict[str, Any] = {
            "input_ids": np.full((rows, new), 5, dtype=np.int64),
            "attention_mask": np.ones((rows, past + new), dtype=np.int64),
        }
        for layer in range(config["num_hidden_layers"]):
            for kind in ("key", "value"):
                out[f"past_key_values.{layer}.{kind}"] = np.zeros(shape, dtype=np.float32)
        return out

    for rows, new in ((1, 5), (2, 1)):
        assert session.run(["logits"], feeds(rows, new, past=10))[0].shape[:2] == (rows, new)
    with pytest.raises(Exception, match="batch_size must be 1 when sequence_length > 1"):
        session.run(["logits"], feeds(2, 5, past=10))


def test_a_request_overrides_the_servers_setting(drafts: Any) -> None:
    """A request turns speculation on where the server has it off (with its own bound and
    n-gram lengths), or off where the server has it on; each answer's usage counts its own
    drafts, as the engine's log line does."""
    from backends.types import Speculative

    asked = answers(
        spec_config(DEMO, 0), PROMPTS, True, max_tokens=60, speculative=Speculative(5, 3, 3)
    )
    plain = answers(spec_config(DEMO, 8), PROMPTS, True, max_tokens=60, speculative=Speculative(0))
    assert [ids(r) for r in asked] == [ids(r) for r in plain]
    usage = [(r.usage.drafted_tokens, r.usage.accepted_tokens) for r in asked]
    assert (sum(d for d, _ in usage), sum(a for _, a in usage)) == drafts()
    assert all(r.usage.verify_runs == 0 for r in plain)
    both_paths(*drafts())


@pytest.mark.parametrize("together", [False, True], ids=["alone", "together"])
def test_min_p_is_the_same_on_and_off(together: bool, drafts: Any) -> None:
    kw: dict[str, Any] = {"max_tokens": 60, "temperature": 1.2, "min_p": 0.2, "top_p": 0.95}
    on, off, loose = [], [], []
    for seed in range(3):
        got = on_and_off(DEMO, PROMPTS, together, seed=seed, **kw)
        on += [ids(r) for r in got[0]]
        off += [ids(r) for r in got[1]]
        unchecked = answers(
            spec_config(DEMO, 0), PROMPTS, together, seed=seed, **(kw | {"min_p": 0.0})
        )
        loose += [ids(r) for r in unchecked]
    assert on == off
    assert on != loose  # the cut changed some draws
    both_paths(*drafts())
