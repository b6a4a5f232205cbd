"""The benchmark at real sizes: the 1B shape's table entry and build plan (the 135M build's
arguments unchanged), llama-server's arms by GGUF type, and the ours ÷ llama-server table
built from a results dict. No model is built here."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from bench.__main__ import main
from bench.benchmarks.run_config import variant_arm
from bench.commands import COMMANDS
from bench.harness.model_cache import BENCH_SHAPES, BUILD_PLANS, build_command
from bench.harness.server import settings
from bench.peers.llama_server import QUANTS, arm_name, gguf_name, quant_arms
from bench.reports.run import peer_table
from bench.reports.run_ratios import llama_arms, peer_rows, ratios
from modelkit.shapes import SHAPES

pytestmark = pytest.mark.unit

OUT = Path("out")


def test_the_1b_shape_has_llama_3_2_1b_dimensions_and_the_padded_vocabulary() -> None:
    s = SHAPES["llama3.2-1b"]
    assert (s["hidden_size"], s["intermediate_size"], s["num_hidden_layers"]) == (2048, 8192, 16)
    assert (s["num_attention_heads"], s["num_key_value_heads"]) == (32, 8)
    assert s["hidden_size"] // s["num_attention_heads"] == 64  # head_dim, as Llama-3.2-1B's
    assert s["max_position_embeddings"] == 8192
    assert s["vocab_size"] == SHAPES["smollm2-135m"]["vocab_size"] == 49152


def test_every_bench_shape_is_a_modelkit_shape() -> None:
    assert set(BENCH_SHAPES) <= set(SHAPES)
    assert "llama3.2-1b" in BENCH_SHAPES


def test_the_135m_build_passes_the_arguments_it_always_has() -> None:
    # no --init-range (decoder.py's 0.2), fp32 weights: the cached build stays what it was
    assert build_command("smollm2-135m", OUT) == [
        "-m", "bench.harness.vocab", "--shape", "smollm2-135m", "--precision", "int4",
        "--out", "out",
    ]  # fmt: skip
    assert BUILD_PLANS["smollm2-135m"].variants == ("int4", "int4-acc0", "fp32")


def test_the_1b_build_draws_std_0_02_saves_fp16_and_builds_only_the_export() -> None:
    cmd = build_command("llama3.2-1b", OUT)
    assert cmd[cmd.index("--init-range") + 1] == "0.02"
    assert cmd[cmd.index("--hf-dtype") + 1] == "float16"
    assert cmd[-2:] == ["--out", "out"]
    assert BUILD_PLANS["llama3.2-1b"].variants == ("int4",)


def test_quant_arms_are_named_by_type_in_any_case_once_each() -> None:
    assert quant_arms("q4_k_m, Q4_0,Q4_K_M") == ["Q4_K_M", "Q4_0"]
    assert [arm_name(q) for q in QUANTS] == ["llama-server Q4_0", "llama-server Q4_K_M"]
    assert gguf_name("Q4_0") == "llama-q4_0.gguf"  # the cached file's name from before
    with pytest.raises(ValueError, match="Q4_K_M"):
        quant_arms("Q5_K")
    with pytest.raises(ValueError):
        quant_arms(" , ")


def test_the_command_line_takes_the_shape_the_arms_and_speculation(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen: dict[str, argparse.Namespace] = {}
    for cmd in ("run", "prefill", "agents", "budget"):
        monkeypatch.setitem(COMMANDS, cmd, lambda args, cmd=cmd: seen.setdefault(cmd, args) and 0)
    main(["run", "--shape", "llama3.2-1b", "--llama-quant", "Q4_0,q4_k_m", "--speculation"])
    main(["budget", "--shape", "llama3.2-1b"])
    assert seen["budget"].shape == "llama3.2-1b"
    main(["prefill", "--shape", "llama3.2-1b", "--llama-quant", "q4_k_m"])
    main(["agents", "--shape", "llama3.2-1b"])
    assert seen["run"].shape == "llama3.2-1b" and seen["run"].speculation
    assert seen["run"].llama_quant == ["Q4_0", "Q4_K_M"]
    assert seen["prefill"].llama_quant == "Q4_K_M"
    assert seen["agents"].llama_quant is None  # the config's default, Q4_0
    with pytest.raises(SystemExit):
        main(["run", "--llama-quant", "Q8_0"])


def test_a_variant_arm_is_named_by_its_label_else_by_its_settings() -> None:
    assert variant_arm("bs128:GENAI_MODEL_DIR=/m/bs128,GENAI_STEP_TOKENS=0") == (
        "ours bs128",
        {"GENAI_MODEL_DIR": "/m/bs128", "GENAI_STEP_TOKENS": "0"},
    )
    assert variant_arm("GENAI_MODEL_DIR=/m/a:b") == (
        "ours GENAI_MODEL_DIR=/m/a:b",
        {"GENAI_MODEL_DIR": "/m/a:b"},
    )


def test_variant_arms_reach_the_config_and_the_peer_table(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: dict[str, argparse.Namespace] = {}
    monkeypatch.setitem(COMMANDS, "run", lambda args: seen.setdefault("run", args) and 0)
    main(["run", "--variant", "bs128:GENAI_MODEL_DIR=/m", "--variant", "A=1"])
    assert seen["run"].variant == ["bs128:GENAI_MODEL_DIR=/m", "A=1"]
    r = results()
    r["single_stream"]["server stream ours bs128"] = _single(21.0, 0.45)  # type: ignore[index]
    r["load"]["ours bs128"] = _load({1: 21.0, 4: 42.0, 8: 60.0})  # type: ignore[index]
    rows = {x["ours"]: x for x in peer_rows(r)}
    assert rows["ours bs128"]["decode_c1"] == pytest.approx(1.4)
    assert rows["ours bs128"]["ttft_c1"] == pytest.approx(0.9)
    assert rows["ours bs128"]["aggregate_c8"] == pytest.approx(0.6)


def _load(tps: dict[int, float], ttft: float = 0.5) -> dict[str, list[dict[str, object]]]:
    return {
        "concurrency": [
            {"concurrency": c, "ok": 16, "output_token_throughput": v, "ttft": {"p50": ttft}}
            for c, v in tps.items()
        ]
    }


def _single(decode: float, ttft: float) -> dict[str, dict[str, float]]:
    def stat(v: float) -> dict[str, float]:
        return {"median": v, "min": v, "max": v, "n": 1}

    return {
        "decode_tps": stat(decode), "ttft": stat(ttft), "e2e": stat(4.0),
        "output_tokens": stat(64),
    }  # fmt: skip


def results() -> dict[str, object]:
    return {
        "availability": {"llama-server Q4_K_M": "not available: why"},
        "single_stream": {
            "raw (threads=2)": _single(20.0, 0.5),
            "server stream scheduler=batch": _single(18.0, 0.6),
            "server stream speculation=off": _single(18.0, 0.6),
            "llama-server Q4_0": _single(15.0, 0.5),
        },
        "load": {
            "scheduler=batch": _load({1: 18.0, 4: 40.0, 8: 50.0}),
            "speculation=off": _load({1: 18.0, 4: 40.0, 8: 50.0}),
            "llama-server Q4_0": _load({1: 15.0, 4: 40.0, 8: 100.0}),
        },
    }


def test_the_peer_table_pairs_each_of_our_arms_with_each_llama_server_arm() -> None:
    r = results()
    assert llama_arms(r) == ["llama-server Q4_0"]
    rows = peer_rows(r)
    assert [(x["ours"], x["llama_server"]) for x in rows] == [
        ("scheduler=batch", "llama-server Q4_0"),
        ("speculation=off", "llama-server Q4_0"),
    ]
    row = rows[0]
    assert row["decode_c1"] == pytest.approx(1.2)
    assert row["ttft_c1"] == pytest.approx(1.2)
    assert row["aggregate_c4"] == pytest.approx(1.0)
    assert row["aggregate_c8"] == pytest.approx(0.5)
    out = ratios(r)
    assert out["speculation=off over llama-server Q4_0 aggregate_c8"] == pytest.approx(0.5)
    text = "\n".join(peer_table(r))
    assert "| scheduler=batch | llama-server Q4_0 | 1.20 | 1.20 | 1.20 | 1.00 | 0.50 |" in text


def test_a_results_file_from_before_the_arms_were_named_still_reports() -> None:
    r = results()
    r["load"] = {"scheduler=batch": _load({4: 40.0}), "llama-server": _load({4: 80.0})}
    assert llama_arms(r) == ["llama-server"]
    assert ratios(r)["batch_c4_over_llama_server_c4"] == pytest.approx(0.5)


def _kernel(ts: int, dur: int, op: str, node: str, shape: list[int] | None = None) -> dict:
    args: dict[str, object] = {"op_name": op}
    if shape is not None:
        args["input_type_shape"] = [{"uint8": [49152, 1024]}, {"int64": shape}]
    return {"cat": "Node", "name": f"{node}_kernel_time", "ts": ts, "dur": dur, "args": args}


def test_server_steps_keeps_the_decode_runs_of_all_rows_and_the_gaps_between_them() -> None:
    from bench.probes.server_steps import decode_runs, summary

    def run(ts: int, rows: int, fed: int) -> list[dict]:
        return [
            {"cat": "Session", "name": "model_run", "ts": ts, "dur": 100},
            _kernel(ts + 1, 10, "GatherBlockQuantized", "/model/embed_tokens/Gather", [rows, fed]),
            _kernel(ts + 20, 60, "MatMulNBits", "/model/layers.0/mlp/down_proj/MatMul"),
            _kernel(ts + 85, 5, "GroupQueryAttention", "/model/layers.0/attn/GQA"),
        ]

    events = run(0, 1, 128) + run(1000, 8, 1) + run(1130, 8, 1) + run(1500, 1, 64)
    events += run(1700, 8, 1)
    runs = decode_runs(events, 8)
    assert [r["gap_ms"] for r in runs] == [None, 0.03, None]  # after a prefill: no gap
    assert runs[0]["ms"]["MatMulNBits: MLP"] == pytest.approx(0.06)
    assert runs[0]["ms"]["outside kernels"] == pytest.approx(0.1 - 0.075)
    s = summary(runs)
    assert s["runs"] == 3 and s["gap_ms"]["n"] == 1


def test_block_quality_compares_next_token_logits_to_the_reference() -> None:
    from bench.probes.block_quality import compare

    ref = [np.array([0.0, 1.0, 3.0]), np.array([2.0, 0.0, 0.0])]
    same = compare(ref, [r.copy() for r in ref])
    assert same["top1_agreement"] == 1.0
    assert same["mean_abs_logit_diff"] == 0.0 and same["kl_mean"] == pytest.approx(0.0)
    moved = compare(ref, [np.array([0.0, 3.5, 3.0]), np.array([2.0, 0.0, 0.0])])
    assert moved["top1_agreement"] == 0.5
    assert moved["mean_abs_logit_diff"] == pytest.approx(2.5 / 3 / 2)
    assert moved["kl_mean"] > 0.0
    # a constant shift leaves the softmax, so the KL, where it was
    assert compare(ref, [r + 5.0 for r in ref])["kl_mean"] == pytest.approx(0.0, abs=1e-12)


def test_an_arms_settings_refuse_what_is_no_environment_name() -> None:
    assert settings("GENAI_A=1,B_2=x=y") == {"GENAI_A": "1", "B_2": "x=y"}
    for text in ("label:GENAI_A=1", "GENAI_A", "genai_a=1", "A=1,"):
        with pytest.raises(ValueError, match="NAME=VALUE"):
            settings(text)


def test_an_agents_variant_takes_its_label(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: dict[str, Any] = {}
    monkeypatch.setattr("bench.benchmarks.agents.run", lambda cfg: seen.setdefault("cfg", cfg))
    with pytest.raises(FileNotFoundError):  # the stub wrote no results.md
        main(
            [
                "agents",
                "--no-llama-server",
                "--out",
                "/nonexistent/agents",
                "--variant",
                "nooverlap:GENAI_PREFILL_OVERLAP=false",
            ]
        )
    assert seen["cfg"].variants == {"ours nooverlap": {"GENAI_PREFILL_OVERLAP": "false"}}
