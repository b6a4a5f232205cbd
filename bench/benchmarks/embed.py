"""The embeddings arm: ``python -m bench embed [--smoke]``.

Side by side in one run, on the same weights and the same thread count:
- **ours**: the server (``main_genai.py`` serving the embedder), closed-loop load at each
  concurrency level, every request 1 to ``max_texts`` fresh sentences, base64 vectors (what
  the openai SDK asks for): sentences per second and p50/p99 request latency;
- **sentence-transformers** on torch, in its own process, on the same kind of workload with
  its own fresh sentences: each request encoded alone in arrival order (a server calling
  ``encode`` per request), and the whole level in one ``encode`` call (its best case);
- **bare session**: a single short sentence through a plain ``InferenceSession.run`` (tokenize,
  run, pool, normalise) in this process, against the same sentence as one request to ours.

The model is all-MiniLM-L6-v2's shape with random weights, built by modelkit/encoders/embedder.py
(needs torch and sentence-transformers: requirements-bench.txt); ``--smoke`` uses the tiny
committed test embedder and fewer requests.
"""

from __future__ import annotations

import asyncio
import json
import random
import statistics
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import httpx

from bench.harness.machine import describe
from bench.harness.paths import ROOT
from bench.harness.prompts import words
from bench.harness.server import live_server

CACHE = ROOT / "bench" / ".cache" / "minilm-embedder"
TINY = ROOT / "tests" / "hub_models" / "st-embedder"
SHORT = "what is the capital of france?"


@dataclass
class EmbedConfig:
    model: Path | None = None  # None: the MiniLM-shaped model, built once into CACHE
    concurrency: list[int] = field(default_factory=lambda: [1, 8, 32])
    requests: int = 32  # per level and round
    max_texts: int = 32
    threads: int = 2
    single_reps: int = 200
    rounds: int = 3  # per level, ours and the peer interleaved
    peers: bool = True
    out: Path = ROOT / "bench" / "results" / "embed"

    @classmethod
    def smoke_config(cls) -> EmbedConfig:
        return cls(
            model=TINY, concurrency=[1, 4], requests=8, max_texts=4, single_reps=20, rounds=1
        )


def ensure_model(log: Any = print) -> Path:
    if not (CACHE / "onnx" / "model.onnx").is_file():
        log("building the MiniLM-shaped embedder (random weights) ...")
        subprocess.run(
            [
                sys.executable,
                "-m",
                "modelkit.encoders.embedder",
                "--out",
                str(CACHE),
                "--shape",
                "minilm",
            ],
            cwd=ROOT,
            check=True,
        )
    return CACHE


def workload(n: int, max_texts: int, seed: int) -> list[list[str]]:
    rng = random.Random(seed)
    return [
        [
            words(rng.randint(6, 24), rng.randrange(1 << 30))
            for _ in range(rng.randint(1, max_texts))
        ]
        for _ in range(n)
    ]


def percentiles(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)

    def at(q: float) -> float:
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))]

    return {"p50": at(0.5), "p99": at(0.99), "mean": statistics.fmean(ordered)}


async def load(url: str, requests: list[list[str]], concurrency: int) -> dict[str, Any]:
    """Closed loop: ``concurrency`` clients, each sending its next request when one returns."""
    pending = list(enumerate(requests))
    latencies: list[float] = []
    failures: list[str] = []

    async def client(http: httpx.AsyncClient) -> None:
        while pending:
            _, texts = pending.pop(0)
            # truncate: sentence-transformers cuts at max_seq_length; the same work on both sides.
            body = {
                "model": "embedder",
                "input": texts,
                "encoding_format": "base64",
                "truncate": True,
            }
            start = time.perf_counter()
            resp = await http.post(f"{url}/v1/embeddings", json=body)
            if resp.status_code != 200 or len(resp.json()["data"]) != len(texts):
                failures.append(resp.text[:200])
            latencies.append(time.perf_counter() - start)

    limits = httpx.Limits(max_connections=concurrency + 4)
    async with httpx.AsyncClient(timeout=120, limits=limits) as http:
        start = time.perf_counter()
        await asyncio.gather(*(client(http) for _ in range(concurrency)))
        wall = time.perf_counter() - start
    sentences = sum(len(r) for r in requests)
    return {
        "concurrency": concurrency,
        "requests": len(requests),
        "sentences": sentences,
        "failures": len(failures),
        "errors": failures[:3],
        "sentences_per_s": sentences / wall,
        "latency": percentiles(latencies),
    }


def single_latency(url: str, folder: Path, threads: int, reps: int) -> dict[str, float]:
    """One short sentence, alternately as a request to ours and through a plain session in
    this process (tokenize, run, pool, normalise): the p50 seconds of each."""
    import numpy as np
    import onnxruntime as ort
    from tokenizers import Tokenizer

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    session = ort.InferenceSession(str(folder / "onnx" / "model.onnx"), options)
    tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
    body = {"model": "embedder", "input": SHORT, "encoding_format": "base64"}

    def bare() -> None:
        ids = np.array([tokenizer.encode(SHORT).ids], dtype=np.int64)
        feeds = {"input_ids": ids, "attention_mask": np.ones_like(ids)}
        feeds["token_type_ids"] = np.zeros_like(ids)
        hidden = session.run(None, feeds)[0][0].mean(axis=0)
        _ = hidden / np.linalg.norm(hidden)

    server: list[float] = []
    plain: list[float] = []
    with httpx.Client(timeout=60) as http:
        for i in range(reps + 5):
            # A pause before each: onnxruntime's idle threads spin for a while after a run,
            # and the other side's would take the CPU this one is measured on.
            time.sleep(0.05)
            start = time.perf_counter()
            bare()
            middle = time.perf_counter()
            time.sleep(0.05)
            middle2 = time.perf_counter()
            http.post(f"{url}/v1/embeddings", json=body).raise_for_status()
            end = time.perf_counter()
            if i >= 5:
                plain.append(middle - start)
                server.append(end - middle2)
    ours, theirs = statistics.median(server), statistics.median(plain)
    return {"server_p50_s": ours, "bare_session_p50_s": theirs, "ratio": ours / theirs}


def _median_of(rounds: list[dict[str, Any]], key: str) -> float:
    return statistics.median(r[key] for r in rounds)


def run(cfg: EmbedConfig, log: Any = print) -> dict[str, Any]:
    """Every level: ``rounds`` times ours then sentence-transformers, each with fresh
    sentences, interleaved so that a busy spell on a shared machine hits both arms."""
    from bench.peers.encoder import STPeer

    folder = cfg.model or ensure_model(log)
    results: dict[str, Any] = {"meta": describe(), "config": asdict(cfg), "model": str(folder)}
    env = {
        "GENAI_MODEL_DIR": str(folder),
        "GENAI_MODEL_NAME": "embedder",
        "GENAI_INTRA_OP_THREADS": str(cfg.threads),
    }
    peer: STPeer | None = None
    if cfg.peers:
        try:
            peer = STPeer(folder, cfg.threads)
            results["st_version"] = peer.version
        except RuntimeError as exc:
            results["st_version"] = f"unavailable: {exc}"
    levels = []
    try:
        with live_server(env=env) as server:
            asyncio.run(load(server.url, workload(4, cfg.max_texts, seed=1), 4))  # warm up
            for level in cfg.concurrency:
                rounds = []
                count = max(cfg.requests, 2 * level)  # enough that `level` stay in flight
                for r in range(cfg.rounds):
                    seed = 1000 * level + 10 * r
                    row = asyncio.run(load(server.url, workload(count, cfg.max_texts, seed), level))
                    if peer is not None:
                        theirs = workload(count, cfg.max_texts, seed + 1)
                        sentences = sum(len(t) for t in theirs)
                        seconds = peer.per_request(theirs)
                        whole = peer.all_at_once([t for req in theirs for t in req])
                        row["st_per_request_sentences_per_s"] = sentences / sum(seconds)
                        row["st_all_at_once_sentences_per_s"] = sentences / whole
                        row["st_per_request_latency"] = percentiles(seconds)
                        row["vs_st_per_request"] = (
                            row["sentences_per_s"] / row["st_per_request_sentences_per_s"]
                        )
                        row["vs_st_all_at_once"] = (
                            row["sentences_per_s"] / row["st_all_at_once_sentences_per_s"]
                        )
                    log(f"  level {level}, round {r}: {json.dumps(row)}")
                    rounds.append(row)
                levels.append({"concurrency": level, "rounds": rounds})
            results["single"] = single_latency(server.url, folder, cfg.threads, cfg.single_reps)
    finally:
        if peer is not None:
            peer.close()
    results["levels"] = levels
    log(f"  single short request: {json.dumps(results['single'])}")
    cfg.out.mkdir(parents=True, exist_ok=True)
    (cfg.out / "embed.json").write_text(json.dumps(results, indent=2, default=str))
    (cfg.out / "embed.md").write_text(markdown(results))
    return results


def markdown(results: dict[str, Any]) -> str:
    """Per level, the median over rounds of each figure and of each round's ratio."""
    meta = results["meta"]
    lines = [
        f"Embeddings, {meta.get('cpu_model')} ({meta.get('usable_cpus')} CPUs), "
        f"{results['config']['threads']} threads, model {Path(results['model']).name}, "
        f"{results['config']['rounds']} rounds per level (medians)",
        "",
        "| in flight | ours sentences/s | ours p50 / p99 ms | ST per request sentences/s | "
        "ST all at once sentences/s | ours / ST per request | ours / ST all at once |",
        "|---|---|---|---|---|---|---|",
    ]
    for level in results["levels"]:
        rounds = level["rounds"]
        p50 = statistics.median(r["latency"]["p50"] for r in rounds) * 1000
        p99 = statistics.median(r["latency"]["p99"] for r in rounds) * 1000
        cells = [str(level["concurrency"]), f"{_median_of(rounds, 'sentences_per_s'):.0f}"]
        cells.append(f"{p50:.0f} / {p99:.0f}")
        if "vs_st_per_request" in rounds[0]:
            cells += [
                f"{_median_of(rounds, 'st_per_request_sentences_per_s'):.0f}",
                f"{_median_of(rounds, 'st_all_at_once_sentences_per_s'):.0f}",
                f"{_median_of(rounds, 'vs_st_per_request'):.2f}x",
                f"{_median_of(rounds, 'vs_st_all_at_once'):.2f}x",
            ]
        else:
            cells += ["-"] * 4
        lines.append("| " + " | ".join(cells) + " |")
    single = results["single"]
    lines += [
        "",
        f"One short sentence: ours p50 {single['server_p50_s'] * 1000:.2f} ms, bare "
        f"InferenceSession.run p50 {single['bare_session_p50_s'] * 1000:.2f} ms "
        f"({single['ratio']:.2f}x).",
        f"sentence-transformers: {results.get('st_version', 'not run')}.",
    ]
    return "\n".join(lines) + "\n"
