"""The CUDA path on a GPU machine, in one run: what no test on a CPU machine can reach.

    python -m modelkit.decoder --shape smollm2-135m --precision fp16 --device cuda --paged \\
        --out cuda-model
    python -m modelkit.decoder --shape smollm2-135m --precision fp16 --device cuda \\
        --out cuda-plain        # the same weights (same seed), for og.Generator
    python scripts/cuda_check.py --model cuda-model --plain cuda-plain --out r.json

Needs onnxruntime-genai-cuda and onnxruntime-gpu in place of the CPU packages. Prints and
writes (``--out``) a JSON record:

- ``versions``: the packages, the providers onnxruntime offers, the GPU;
- ``oracle``: greedy tokens of 8 prompts sent at once through the core (the ``auto`` scheduler,
  which is og's Engine with continuous batching on the paged-attention model, and the
  ``generator`` scheduler on the plain one) against a plain og.Generator loop on the plain
  folder, one prompt at a time (og.Generator cannot run a paged graph). fp16 on a GPU:
  batching and kernels may change the last bits, so a mismatch is reported with where it
  starts, not hidden;
- ``multimodal`` (``--vision``): the committed Qwen2.5-VL test model on CUDA through the core,
  against the tokens Hugging Face's generate() gave at build time (its expected.json);
- ``bench``: for each scheduler and number of requests in flight, fresh 256-token prompts
  (a unique first word each) and 128 tokens each: aggregate output tokens/s.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from backends.config import Limits, ModelConfig, ServiceConfig  # noqa: E402
from backends.core.request import ChatPrompt, GenerationRequest, TextPrompt  # noqa: E402
from backends.core.service import InferenceService  # noqa: E402
from backends.types import SamplingParams  # noqa: E402

DEVICE = {"name": "cuda"}  # --device: "cpu" tries the script itself on a CPU machine
WORDS = "river mountain city road tree bird fish water fire stone cloud light house door".split()


def load_cuda_libraries() -> None:
    """CUDA and cuDNN from the pip packages beside (torch's or onnxruntime's own preload)."""
    try:
        import torch  # noqa: F401  (loads the CUDA runtime, cuBLAS and cuDNN it was built with)
    except ImportError:
        pass
    import onnxruntime as ort

    if hasattr(ort, "preload_dlls"):
        ort.preload_dlls()


def versions() -> dict[str, Any]:
    import onnxruntime as ort
    import onnxruntime_genai as og

    out: dict[str, Any] = {
        "onnxruntime_genai": og.__version__,
        "onnxruntime": ort.__version__,
        "providers": ort.get_available_providers(),
    }
    try:
        import torch

        out["gpu"] = torch.cuda.get_device_name(0)
    except Exception as exc:  # the record says why, the run goes on
        out["gpu"] = f"unknown ({exc})"
    return out


def prompts(n: int, words: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return [
        " ".join([f"request{seed}x{i}", *(rng.choice(WORDS) for _ in range(words))])
        for i in range(n)
    ]


def og_greedy(folder: Path, texts: list[str], n: int) -> list[list[int]]:
    import onnxruntime_genai as og

    model = og.Model(str(folder))
    tokenizer = og.Tokenizer(model)
    eos = set(tokenizer.eos_token_ids)
    out = []
    for text in texts:
        ids = tokenizer.encode(text)
        params = og.GeneratorParams(model)
        params.set_search_options(do_sample=False, max_length=len(ids) + n)
        gen = og.Generator(model, params)
        gen.append_tokens(ids)
        tokens: list[int] = []
        while not gen.is_done() and len(tokens) < n:
            gen.generate_next_token()
            token = int(gen.get_next_tokens()[0])
            if token in eos:
                break
            tokens.append(token)
        out.append(tokens)
    return out


async def _serve(
    folder: Path, scheduler: str, requests: list[GenerationRequest], slots: int
) -> tuple[str | None, list[Any], float]:
    cfg = ServiceConfig(
        ModelConfig(folder, device=DEVICE["name"], scheduler=scheduler),  # type: ignore[arg-type]
        Limits(max_concurrency=slots, max_queue=len(requests) + slots),
    )
    service = InferenceService(cfg)
    await service.start()
    try:
        start = time.perf_counter()
        handles = [await service.submit(r) for r in requests]
        results = [await h.result() for h in handles]
        return service.strategy_name, results, time.perf_counter() - start
    finally:
        await service.stop()


def serve(folder: Path, scheduler: str, requests: list[GenerationRequest], slots: int) -> Any:
    return asyncio.run(_serve(folder, scheduler, requests, slots))


def greedy(text: str, n: int, min_tokens: int = 0) -> GenerationRequest:
    sampling = SamplingParams(temperature=0.0, min_new_tokens=min_tokens)
    return GenerationRequest(TextPrompt(text), sampling, max_tokens=n)


def first_difference(a: list[int], b: list[int]) -> int | None:
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))


def oracle(paged: Path, plain: Path) -> dict[str, Any]:
    """og.Generator cannot run a paged-attention graph (its input_ids are packed), so the
    oracle runs on ``plain``: the same weights built without paged attention."""
    texts = prompts(8, 40, seed=1)
    expected = og_greedy(plain, texts, 32)
    record: dict[str, Any] = {}
    for scheduler, folder in (("auto", paged), ("generator", plain)):
        name, results, _ = serve(folder, scheduler, [greedy(t, 32) for t in texts], 8)
        got = [[t.token_id for t in r.choices[0].tokens] for r in results]
        record[scheduler] = {
            "strategy": name,
            "equal": sum(g == e for g, e in zip(got, expected, strict=True)),
            "of": len(texts),
            "first_difference": [
                first_difference(g, e) for g, e in zip(got, expected, strict=True)
            ],
        }
    return record


def multimodal(vision: Path) -> dict[str, Any]:
    from backends.media import ImageLimits, decode_image

    expected = json.loads((vision / "expected.json").read_text())
    requests = []
    for case in expected["cases"]:
        images = [
            decode_image((vision / "images" / f).read_bytes(), f"image {i}", ImageLimits())
            for i, f in enumerate(case["images"])
        ]
        requests.append(
            GenerationRequest(
                ChatPrompt(case["messages"], images=images),
                SamplingParams(temperature=0.0),
                max_tokens=expected["max_new_tokens"],
            )
        )
    name, results, seconds = serve(vision, "auto", requests, 4)
    got = [[t.token_id for t in r.choices[0].tokens] for r in results]
    want = [c["generated_ids"] for c in expected["cases"]]
    return {
        "strategy": name,
        "equal": sum(g == w for g, w in zip(got, want, strict=True)),
        "of": len(want),
        "first_difference": [first_difference(g, w) for g, w in zip(got, want, strict=True)],
        "image_tokens": [r.usage.image_tokens for r in results],
        "seconds": round(seconds, 2),
    }


def bench(paged: Path, plain: Path, levels: list[int]) -> list[dict[str, Any]]:
    rows = []
    for scheduler, folder in (("auto", paged), ("generator", plain)):
        serve(folder, scheduler, [greedy("warm up", 8)], 1)  # load, first kernels
        for level in levels:
            n = max(8, 2 * level)
            texts = prompts(n, 250, seed=1000 + level + (0 if scheduler == "auto" else 500))
            reqs = [greedy(t, 128, min_tokens=128) for t in texts]
            name, results, seconds = serve(folder, scheduler, reqs, level)
            tokens = sum(r.usage.completion_tokens for r in results)
            rows.append(
                {
                    "scheduler": scheduler,
                    "strategy": name,
                    "in_flight": level,
                    "requests": n,
                    "output_tokens": tokens,
                    "seconds": round(seconds, 2),
                    "tokens_per_s": round(tokens / seconds, 1),
                }
            )
            print(json.dumps(rows[-1]), flush=True)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", type=Path, required=True, help="a CUDA paged-attention folder")
    ap.add_argument(
        "--plain", type=Path, required=True, help="the same weights without paged attention"
    )
    ap.add_argument("--vision", type=Path, help="a multimodal folder (tests/hub_models/qwen2.5-vl)")
    ap.add_argument("--levels", default="1,8,32", help="requests in flight to benchmark")
    ap.add_argument("--device", default="cuda", help="cpu: a dry run of this script")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    DEVICE["name"] = args.device
    if args.device == "cuda":
        load_cuda_libraries()
    record: dict[str, Any] = {"versions": versions()}
    print(json.dumps(record["versions"]), flush=True)
    steps: list[tuple[str, Any]] = [("oracle", lambda: oracle(args.model, args.plain))]
    if args.vision:
        steps.append(("multimodal", lambda: multimodal(args.vision)))
    levels = [int(n) for n in args.levels.split(",")]
    steps.append(("bench", lambda: bench(args.model, args.plain, levels)))
    for key, step in steps:
        try:
            record[key] = step()
        except Exception as exc:  # one failing part must not hide the others' figures
            record[key] = {"error": f"{type(exc).__name__}: {exc}"[:2000]}
        print(key, json.dumps(record[key]), flush=True)
        if args.out:
            args.out.write_text(json.dumps(record, indent=1))


if __name__ == "__main__":
    main()
