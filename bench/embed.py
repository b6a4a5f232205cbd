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

The model is all-MiniLM-L6-v2's shape with random weights, built by scripts/build_embedder.py
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

from bench.machine import describe
from bench.models import ROOT
from bench.prompts import words
from bench.server import live_server

CACHE = ROOT / "bench" / ".cache" / "minilm-embedder"
TINY = ROOT / "tests" / "hub_models" / "st-embedder"
SHORT = "what is the capital of france?"


@dataclass
class EmbedConfig:
    model: Path | None = None  # None: the MiniLM-shaped model, built once into CACHE
    concurrency: list[int] = field(default_factory=lambda: [1, 8, 32])
    requests: int = 64  # per level
    max_texts: int = 32
    threads: int = 2
    single_reps: int = 200
    peers: bool = True
    out: Path = ROOT / "bench" / "results" / "embed"

    @classmethod
    def smoke_config(cls) -> EmbedConfig:
        return cls(model=TINY, concurrency=[1, 4], requests=8, max_texts=4, single_reps=20)


def ensure_model(log: Any = print) -> Path:
    if not (CACHE / "onnx" / "model.onnx").is_file():
        log("building the MiniLM-shaped embedder (random weights) ...")
        subprocess.run(
            [sys.executable, "scripts/build_embedder.py", "--out", str(CACHE), "--shape", "minilm"],
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
            body = {"model": "embedder", "input": texts, "encoding_format": "base64"}
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
        "sentences_per_s": sentences / wall,
        "latency": percentiles(latencies),
    }


def single_latency(url: str, reps: int) -> float:
    """p50 seconds of one short sentence as a request to ours, one at a time."""
    times = []
    with httpx.Client(timeout=60) as http:
        body = {"model": "embedder", "input": SHORT, "encoding_format": "base64"}
        for i in range(reps + 5):
            start = time.perf_counter()
            http.post(f"{url}/v1/embeddings", json=body).raise_for_status()
            if i >= 5:
                times.append(time.perf_counter() - start)
    return statistics.median(times)


def bare_latency(folder: Path, threads: int, reps: int) -> float:
    """p50 seconds of the same sentence through a plain session: tokenize, run, pool, norm."""
    import numpy as np
    import onnxruntime as ort
    from tokenizers import Tokenizer

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    session = ort.InferenceSession(str(folder / "onnx" / "model.onnx"), options)
    tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
    times = []
    for i in range(reps + 5):
        start = time.perf_counter()
        ids = np.array([tokenizer.encode(SHORT).ids], dtype=np.int64)
        feeds = {"input_ids": ids, "attention_mask": np.ones_like(ids)}
        feeds["token_type_ids"] = np.zeros_like(ids)
        hidden = session.run(None, feeds)[0][0].mean(axis=0)
        _ = hidden / np.linalg.norm(hidden)
        if i >= 5:
            times.append(time.perf_counter() - start)
    return statistics.median(times)


def sentence_transformers_arm(folder: Path, cfg: EmbedConfig, log: Any) -> dict[str, Any] | str:
    from bench.embed_peer import STPeer

    try:
        peer = STPeer(folder, cfg.threads)
    except RuntimeError as exc:
        return f"unavailable: {exc}"
    try:
        levels = []
        for level in cfg.concurrency:
            requests = workload(cfg.requests, cfg.max_texts, seed=2000 + level)
            sentences = sum(len(r) for r in requests)
            seconds = peer.per_request(requests)
            whole = peer.all_at_once([t for r in requests for t in r])
            levels.append(
                {
                    "concurrency": level,
                    "sentences": sentences,
                    "per_request_sentences_per_s": sentences / sum(seconds),
                    "per_request_latency": percentiles(seconds),
                    "all_at_once_sentences_per_s": sentences / whole,
                }
            )
            log(f"  sentence-transformers, level {level}: {json.dumps(levels[-1])}")
        return {"version": peer.version, "levels": levels}
    finally:
        peer.close()


def run(cfg: EmbedConfig, log: Any = print) -> dict[str, Any]:
    folder = cfg.model or ensure_model(log)
    results: dict[str, Any] = {"meta": describe(), "config": asdict(cfg), "model": str(folder)}
    env = {
        "GENAI_MODEL_DIR": str(folder),
        "GENAI_MODEL_NAME": "embedder",
        "GENAI_INTRA_OP_THREADS": str(cfg.threads),
    }
    with live_server(env=env) as server:
        ours = []
        for level in cfg.concurrency:
            requests = workload(cfg.requests, cfg.max_texts, seed=1000 + level)
            asyncio.run(load(server.url, requests[:4], level))  # warm up
            ours.append(asyncio.run(load(server.url, requests, level)))
            log(f"  ours, level {level}: {json.dumps(ours[-1])}")
        single = single_latency(server.url, cfg.single_reps)
    results["ours"] = ours
    results["single"] = {
        "server_p50_s": single,
        "bare_session_p50_s": bare_latency(folder, cfg.threads, cfg.single_reps),
    }
    results["single"]["ratio"] = single / results["single"]["bare_session_p50_s"]
    log(f"  single short request: {json.dumps(results['single'])}")
    if cfg.peers:
        results["sentence_transformers"] = sentence_transformers_arm(folder, cfg, log)
    cfg.out.mkdir(parents=True, exist_ok=True)
    (cfg.out / "embed.json").write_text(json.dumps(results, indent=2, default=str))
    (cfg.out / "embed.md").write_text(markdown(results))
    return results


def markdown(results: dict[str, Any]) -> str:
    meta = results["meta"]
    lines = [
        f"Embeddings, {meta.get('cpu_model')} ({meta.get('usable_cpus')} CPUs), "
        f"{results['config']['threads']} threads, model {Path(results['model']).name}",
        "",
        "| in flight | ours sentences/s | ours p50 / p99 ms | ST per request sentences/s | "
        "ST all at once sentences/s | ours / ST per request | ours / ST all at once |",
        "|---|---|---|---|---|---|---|",
    ]
    peer = results.get("sentence_transformers")
    st = {lv["concurrency"]: lv for lv in peer["levels"]} if isinstance(peer, dict) else {}
    for row in results["ours"]:
        c, sps, lat = row["concurrency"], row["sentences_per_s"], row["latency"]
        other = st.get(c)
        cells = [
            str(c),
            f"{sps:.0f}",
            f"{lat['p50'] * 1000:.1f} / {lat['p99'] * 1000:.1f}",
        ]
        if other is not None:
            per, whole = other["per_request_sentences_per_s"], other["all_at_once_sentences_per_s"]
            cells += [f"{per:.0f}", f"{whole:.0f}", f"{sps / per:.2f}x", f"{sps / whole:.2f}x"]
        else:
            cells += ["-"] * 4
        lines.append("| " + " | ".join(cells) + " |")
    single = results["single"]
    lines += [
        "",
        f"One short sentence: ours p50 {single['server_p50_s'] * 1000:.2f} ms, bare "
        f"InferenceSession.run p50 {single['bare_session_p50_s'] * 1000:.2f} ms "
        f"({single['ratio']:.2f}x).",
    ]
    if isinstance(peer, str):
        lines.append(f"sentence-transformers: {peer}")
    elif isinstance(peer, dict):
        lines.append(f"Peer: {peer['version']}.")
    return "\n".join(lines) + "\n"
