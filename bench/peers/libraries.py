"""Peers on the same weights: Hugging Face transformers ``generate()`` and llama.cpp.

llama.cpp runs through llama-cpp-python, which has no binary wheel: it is compiled once from
source (a few minutes on 2 cores) with portable CPU flags and the wheel is cached under
bench/.cache/wheels/<isa>. The HF folder is converted with the ``convert_hf_to_gguf.py``
shipped in the source distribution (its tokenizer declared as ``gpt-2``: the locally trained
byte-level BPE is not one it knows) and quantized (Q4_0, or another type for llama-server's arms)
by the ``llama-quantize`` built beside ``llama-server`` (bench/peers/llama_server.py) or, without
it, by llama-cpp-python.
"""

from __future__ import annotations

import glob
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench.harness.paths import CACHE
from bench.peers.llama_server import (
    LLAMA_PKG,
    ggml_cmake_flags,
    gguf_name,
    isa,
    quantize_gguf,
    sdist_tarball,
    vendor_dir,
)
from bench.peers.raw import RawResult

# Without these the native build uses -march=native and every quantized model segfaulted at
# the first eval on these AMX-reporting CPUs; AVX-512 only where the CPU has it (else SIGILL).
LLAMA_CMAKE_ARGS = " ".join(ggml_cmake_flags())


class TransformersPeer:
    """``generate()`` in PyTorch on the CPU, greedy, a fixed number of new tokens."""

    name = "transformers"

    def __init__(self, hf_dir: Path, threads: int) -> None:
        import torch
        from transformers import AutoModelForCausalLM

        torch.set_num_threads(threads)
        self.torch = torch
        self.model = AutoModelForCausalLM.from_pretrained(hf_dir, dtype=torch.float32).eval()
        import transformers

        self.version = f"transformers {transformers.__version__}, torch {torch.__version__}"

    def run(self, prompt_ids: list[int], new_tokens: int) -> RawResult:
        from transformers.generation.streamers import BaseStreamer

        stamps: list[float] = []

        class Stamps(BaseStreamer):  # type: ignore[misc]
            first = True

            def put(self, value: Any) -> None:
                if self.first:  # generate() hands the prompt over first
                    self.first = False
                    return
                stamps.append(time.perf_counter())

            def end(self) -> None:
                pass

        ids = self.torch.tensor([prompt_ids])
        t0 = time.perf_counter()
        with self.torch.inference_mode():
            self.model.generate(
                ids,
                attention_mask=self.torch.ones_like(ids),
                max_new_tokens=new_tokens,
                min_new_tokens=new_tokens,
                do_sample=False,
                streamer=Stamps(),
                pad_token_id=0,
            )
        n = len(stamps)
        decode = (n - 1) / (stamps[-1] - stamps[0]) if n > 1 else 0.0
        return RawResult(stamps[0] - t0, decode, stamps[-1] - t0, n, len(prompt_ids))


def ensure_llama_cpp(log: Any = print) -> str | None:
    """Import llama_cpp, building and caching its wheel if needed. Returns why not, or None."""
    try:
        import llama_cpp  # noqa: F401

        return None
    except ImportError:
        pass
    wheels = CACHE / "wheels" / isa()  # a wheel built with AVX-512 dies on an AVX2-only CPU
    wheels.mkdir(parents=True, exist_ok=True)
    found = glob.glob(str(wheels / "llama_cpp_python-*.whl"))
    if not found:
        log("building llama-cpp-python from source (~5 min on 2 cores), cached afterwards ...")
        env = dict(os.environ, CMAKE_ARGS=LLAMA_CMAKE_ARGS)
        try:
            source = str(sdist_tarball())  # the sdist llama-server is built from, if cached
        except RuntimeError:
            source = LLAMA_PKG
        r = subprocess.run(
            [sys.executable, "-m", "pip", "wheel", "--no-deps", "-w", str(wheels), source],
            env=env,
            capture_output=True,
            text=True,
        )
        found = glob.glob(str(wheels / "llama_cpp_python-*.whl"))
        if r.returncode != 0 or not found:
            return f"llama-cpp-python did not build: {r.stderr.strip()[-300:]}"
    r = subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", found[0]], capture_output=True, text=True
    )
    if r.returncode != 0:
        return f"llama-cpp-python wheel did not install: {r.stderr.strip()[-300:]}"
    try:
        import llama_cpp  # noqa: F401
    except ImportError as exc:
        return f"llama_cpp does not import: {exc}"
    return None


def _converter_dir() -> Path:
    """vendor/llama.cpp from the llama-cpp-python sdist (downloaded once into the cache)."""
    return vendor_dir(full=False)


_CONVERT = """
import sys
vendor = sys.argv.pop(1)
sys.path[:0] = [vendor, vendor + "/gguf-py"]
from conversion import base
# The locally trained byte-level BPE has no known pre-tokenizer hash; it is GPT-2 style.
base.TextModel.get_vocab_base_pre = lambda self, tokenizer: "gpt-2"
sys.path.insert(0, vendor)
import convert_hf_to_gguf
convert_hf_to_gguf.main()
"""


def ensure_gguf(
    hf_dir: Path,
    log: Any = print,
    quantize: Path | None = None,
    threads: int = 1,
    quant: str = "Q4_0",
) -> Path:
    """The HF weights as a GGUF of ``quant`` (cached beside the model; the f32 conversion is
    shared by every type): quantized by the ``quantize`` binary (llama-quantize) when given,
    else by llama-cpp-python (Q4_0 only)."""
    out = hf_dir.parent.parent / gguf_name(quant)
    if out.exists():
        return out
    f32 = hf_dir.parent.parent / "llama-f32.gguf"
    if not f32.exists():
        log("converting the HF weights to GGUF ...")
        vendor = _converter_dir()
        r = subprocess.run(
            [sys.executable, "-c", _CONVERT, str(vendor), str(hf_dir), "--outfile", str(f32)]
            + ["--outtype", "f32"],
            capture_output=True,
            text=True,
        )
        if r.returncode != 0 or not f32.exists():
            raise RuntimeError(f"GGUF conversion failed: {r.stderr.strip()[-400:]}")
    if quantize is not None:
        log(f"quantizing the GGUF to {quant} ...")
        quantize_gguf(quantize, f32, out, quant, threads)
        return out
    if quant != "Q4_0":
        raise RuntimeError(f"{quant} needs llama-quantize (built beside llama-server)")
    try:
        import llama_cpp
    except ImportError:
        raise RuntimeError("no quantizer: neither llama_cpp nor llama-quantize") from None
    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = llama_cpp.LLAMA_FTYPE_MOSTLY_Q4_0
    rc = llama_cpp.llama_model_quantize(str(f32).encode(), str(out).encode(), params)
    if rc != 0 or not out.exists():
        raise RuntimeError(f"llama_model_quantize returned {rc}")
    return out


class LlamaCppPeer:
    """llama.cpp through llama-cpp-python's low-level eval: greedy, EOS ignored."""

    name = "llama.cpp"

    def __init__(self, gguf: Path, threads: int, n_ctx: int = 2048) -> None:
        import llama_cpp
        import numpy as np

        self.np = np
        self.llm = llama_cpp.Llama(
            str(gguf),
            n_threads=threads,
            n_threads_batch=threads,
            n_ctx=n_ctx,
            n_batch=512,
            verbose=False,
        )
        self.version = f"llama-cpp-python {llama_cpp.__version__} (Q4_0)"

    def run(self, prompt_ids: list[int], new_tokens: int) -> RawResult:
        llm = self.llm
        llm.reset()  # n_tokens = 0: the next eval overwrites the KV cache from position 0
        stamps = []
        t0 = time.perf_counter()
        llm.eval(prompt_ids)
        for _ in range(new_tokens):
            tok = int(self.np.argmax(llm.scores[llm.n_tokens - 1]))
            stamps.append(time.perf_counter())
            if len(stamps) < new_tokens:
                llm.eval([tok])
        n = len(stamps)
        decode = (n - 1) / (stamps[-1] - stamps[0]) if n > 1 else 0.0
        return RawResult(stamps[0] - t0, decode, stamps[-1] - t0, n, len(prompt_ids))
