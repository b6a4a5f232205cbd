"""llama.cpp's own C++ ``llama-server`` as a peer under load (continuous batching over slots).

llama-cpp-python's server handles one request at a time; the C++ ``llama-server`` batches
``--parallel N`` slots continuously, which is the fair peer for a batching scheduler. It is
built once from the llama.cpp sources vendored in the llama-cpp-python source distribution
(``cmake`` in ``vendor/llama.cpp``, targets ``llama-server`` and ``llama-quantize``: 10-18 min
on 2 cores for llama-cpp-python 0.3.36's sources) with portable CPU flags (AVX-512 only where
the CPU lists ``avx512f``: a binary built with it dies with SIGILL on AVX2-only machines) and
cached under bench/.cache/llama-server/, one build per source version and instruction set. If
it cannot be built, the caller records why and the run goes on.

The benchmark drives it with its own load client over ``/v1/completions`` with the prompt as
token ids (exactly the ids every other arm gets), ``ignore_eos`` and ``max_tokens`` = the
fixed output length, greedy.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tarfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import httpx

from bench.harness.paths import CACHE
from bench.harness.server import ServerProcess

LLAMA_PKG = "llama-cpp-python"
SDIST = CACHE / "sdist"
BUILDS = CACHE / "llama-server"
# Bump to rebuild cached binaries when the flags below change.
BUILD_KEY = "v1"


def has_avx512() -> bool:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("flags"):
                    return "avx512f" in line.split()
    except OSError:
        pass
    return False


def isa() -> str:
    return "avx512" if has_avx512() else "avx2"


def ggml_cmake_flags() -> list[str]:
    """Portable CPU flags: without them the native build (-march=native) segfaulted on the
    AMX-reporting CPUs here; AVX-512 only where /proc/cpuinfo lists avx512f."""
    avx512 = "ON" if has_avx512() else "OFF"
    return [
        "-DGGML_NATIVE=OFF",
        "-DGGML_AVX=ON",
        "-DGGML_AVX2=ON",
        "-DGGML_FMA=ON",
        "-DGGML_F16C=ON",
        f"-DGGML_AVX512={avx512}",
        f"-DGGML_AVX512_VNNI={avx512}",
        "-DGGML_AMX_INT8=OFF",
        "-DGGML_AMX_TILE=OFF",
    ]


def sdist_tarball() -> Path:
    """The llama-cpp-python source distribution, downloaded once into the cache."""
    tars = sorted(SDIST.glob("llama_cpp_python-*.tar.gz"))
    if not tars:
        SDIST.mkdir(parents=True, exist_ok=True)
        r = subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:"]
            + ["-d", str(SDIST), LLAMA_PKG],
            check=False,
            capture_output=True,
            text=True,
        )
        tars = sorted(SDIST.glob("llama_cpp_python-*.tar.gz"))
        if not tars:
            raise RuntimeError(
                "could not download the llama-cpp-python source distribution: "
                + r.stderr.strip()[-300:]
            )
    return tars[-1]


def vendor_dir(full: bool) -> Path:
    """``vendor/llama.cpp`` of the sdist, extracted beside it: only the GGUF converter
    (``full=False``) or the whole source tree (``full=True``, for the C++ build)."""
    tar_path = sdist_tarball()
    root = SDIST / tar_path.name.removesuffix(".tar.gz")
    vendor = root / "vendor" / "llama.cpp"
    marker = vendor / ("CMakeLists.txt" if full else "convert_hf_to_gguf.py")
    if marker.exists():
        return vendor
    with tarfile.open(tar_path) as tar:
        members = [
            m
            for m in tar.getmembers()
            if "/vendor/llama.cpp/" in m.name
            and (
                full
                or m.name.endswith("convert_hf_to_gguf.py")
                or "/gguf-py/" in m.name
                or "/vendor/llama.cpp/conversion/" in m.name
            )
        ]
        tar.extractall(SDIST, members=members, filter="data")
    return vendor


@dataclass
class Binaries:
    server: Path
    quantize: Path | None
    info: dict[str, Any]


def _build_dir() -> Path:
    version = sdist_tarball().name.removesuffix(".tar.gz").removeprefix("llama_cpp_python-")
    return BUILDS / f"{version}-{isa()}-{BUILD_KEY}"


def ensure_binaries(log: Any = print) -> tuple[Binaries | None, str | None]:
    """Build (or reuse) ``llama-server`` and ``llama-quantize``. Returns (binaries, None) or
    (None, why not)."""
    try:
        build = _build_dir()
    except Exception as exc:
        return None, f"{type(exc).__name__}: {exc}"[:400]
    server, quantize = build / "bin" / "llama-server", build / "bin" / "llama-quantize"
    info_file = build / "build.json"
    if server.exists() and info_file.exists():
        info = json.loads(info_file.read_text())
        return Binaries(server, quantize if quantize.exists() else None, info), None
    cmake = shutil.which("cmake")
    if cmake is None:
        return None, "cmake not found (apt-get install cmake g++, or pip install cmake)"
    if shutil.which("c++") is None and shutil.which("g++") is None:
        return None, "no C++ compiler found (apt-get install g++)"
    try:
        src = vendor_dir(full=True)
    except Exception as exc:
        return None, f"llama.cpp sources: {type(exc).__name__}: {exc}"[:400]
    log(f"building llama-server from {src.parent.parent.name} ({isa()}, 10-18 min on 2 cores) ...")
    shutil.rmtree(build, ignore_errors=True)
    build.mkdir(parents=True)
    flags = [
        "-DCMAKE_BUILD_TYPE=Release",
        "-DLLAMA_CURL=OFF",
        "-DLLAMA_USE_PREBUILT_UI=OFF",
        "-DLLAMA_OPENSSL=OFF",
        "-DBUILD_SHARED_LIBS=OFF",
        "-DLLAMA_BUILD_TESTS=OFF",
        "-DLLAMA_BUILD_EXAMPLES=OFF",
        *ggml_cmake_flags(),
    ]
    generator = ["-G", "Ninja"] if shutil.which("ninja") else []
    jobs = str(max(1, len(os.sched_getaffinity(0))))
    t0 = time.perf_counter()
    with open(build / "build.log", "w") as blog:
        steps = [
            [cmake, "-S", str(src), "-B", str(build), *generator, *flags],
            [cmake, "--build", str(build), "--target", "llama-server", "llama-quantize"]
            + ["-j", jobs],
        ]
        for cmd in steps:
            blog.write("$ " + " ".join(cmd) + "\n")
            blog.flush()
            r = subprocess.run(cmd, stdout=blog, stderr=subprocess.STDOUT, check=False)
            if r.returncode != 0:
                break
    seconds = time.perf_counter() - t0
    if r.returncode != 0 or not server.exists():
        tail = (build / "build.log").read_text(errors="replace").strip()[-400:]
        return None, f"llama-server did not build (exit {r.returncode}): {tail}"
    version = subprocess.run(
        [str(server), "--version"], capture_output=True, text=True, check=False
    )
    info = {
        "source": src.parent.parent.name,
        "isa": isa(),
        "cmake_flags": flags,
        "build_seconds": round(seconds, 1),
        "version": (version.stdout + version.stderr).strip()[-300:],
    }
    info_file.write_text(json.dumps(info, indent=2))
    log(f"llama-server built in {seconds / 60:.1f} min")
    return Binaries(server, quantize if quantize.exists() else None, info), None


# The GGUF types llama-server is measured on, by llama-quantize's name. Q4_0 has the int4
# export's own layout (blocks of 32, one scale); Q4_K_M (super-blocks of 256, 6-bit scales,
# some tensors at Q6_K) is what users of llama.cpp usually pick.
QUANTS = ("Q4_0", "Q4_K_M")
DEFAULT_QUANTS = ("Q4_0",)


def quant_arms(text: str) -> list[str]:
    """``--llama-quant``'s comma list as llama-quantize's names (any case), in order, once
    each; an unknown name is an error that lists the known ones."""
    known = {q.lower(): q for q in QUANTS}
    out: list[str] = []
    for item in (x.strip() for x in text.split(",")):
        if not item:
            continue
        if item.lower() not in known:
            raise ValueError(f"unknown llama-server quantization {item!r}: one of {QUANTS}")
        if known[item.lower()] not in out:
            out.append(known[item.lower()])
    if not out:
        raise ValueError(f"no llama-server quantization named: one of {QUANTS}")
    return out


def arm_name(quant: str) -> str:
    """llama-server's arm on a GGUF of ``quant``, as every table names it."""
    return f"llama-server {quant}"


def gguf_name(quant: str) -> str:
    """The cached GGUF file of ``quant`` (``llama-q4_0.gguf``: the name it has always had)."""
    return f"llama-{quant.lower()}.gguf"


def quantize_gguf(quantize: Path, f32: Path, out: Path, quant: str, threads: int) -> None:
    r = subprocess.run(
        [str(quantize), str(f32), str(out), quant, str(threads)],
        capture_output=True,
        text=True,
        check=False,
    )
    if r.returncode != 0 or not out.exists():
        raise RuntimeError(f"llama-quantize failed: {(r.stdout + r.stderr).strip()[-300:]}")


def quantize_q4_0(quantize: Path, f32: Path, q4: Path, threads: int) -> None:
    quantize_gguf(quantize, f32, q4, "Q4_0", threads)


@dataclass
class LlamaServer(ServerProcess):
    """A ``llama-server`` on a free port: ``parallel`` slots of ``ctx_per_slot`` tokens each,
    continuous batching, ``threads`` threads for both prefill and decode."""

    binary: Path = Path("llama-server")
    gguf: Path = Path("model.gguf")
    threads: int = 1
    parallel: int = 1
    ctx_per_slot: int = 1024
    extra_args: list[str] = field(default_factory=list)
    health: ClassVar[str] = "/health"
    ready_within: ClassVar[float] = 120.0

    def command(self) -> list[str]:
        return [
            str(self.binary),
            "--model", str(self.gguf),
            "--host", "127.0.0.1",
            "--port", str(self.port),
            "--threads", str(self.threads),
            "--threads-batch", str(self.threads),
            "--parallel", str(self.parallel),
            "--cont-batching",
            "--ctx-size", str(self.parallel * self.ctx_per_slot),
            "--no-webui",
            "--alias", "bench",
            *self.extra_args,
        ]  # fmt: skip

    def start(self) -> None:
        import tempfile

        self.log = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(
            self.command(), stdout=self.log, stderr=self.log, stdin=subprocess.DEVNULL
        )

    def failed_to_load(self, health: httpx.Response) -> bool:
        return False  # /health is 503 while the model loads; a failed load exits

    def routes(self) -> set[str]:
        return {"/v1/completions", "/v1/chat/completions"}


# Request fields for llama-server's /v1/completions: exactly max_tokens new tokens, greedy.
REQUEST_EXTRA: dict[str, Any] = {"ignore_eos": True, "top_k": 1}


__all__ = [
    "DEFAULT_QUANTS",
    "QUANTS",
    "REQUEST_EXTRA",
    "Binaries",
    "LlamaServer",
    "arm_name",
    "ensure_binaries",
    "ggml_cmake_flags",
    "gguf_name",
    "has_avx512",
    "isa",
    "quant_arms",
    "quantize_gguf",
    "quantize_q4_0",
    "sdist_tarball",
    "vendor_dir",
]
