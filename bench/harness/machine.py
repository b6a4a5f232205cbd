"""What the numbers were measured on: CPU model, cores, RAM, versions, source revision."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
import time
from importlib import metadata
from typing import Any

from bench.harness.paths import ROOT

PACKAGES = (
    "onnxruntime-genai",
    "onnxruntime",
    "fastapi",
    "uvicorn",
    "httpx",
    "numpy",
    "torch",
    "transformers",
    "llama_cpp_python",
)


def _cpuinfo() -> dict[str, Any]:
    model, flags = "unknown", set()
    try:
        for line in open("/proc/cpuinfo", encoding="utf-8"):
            key, _, value = line.partition(":")
            if key.strip() == "model name" and model == "unknown":
                model = value.strip()
            elif key.strip() == "flags" and not flags:
                flags = set(value.split())
    except OSError:
        model = platform.processor() or "unknown"
    wanted = ("avx2", "avx512f", "avx512_vnni", "avx512_bf16", "amx_int8", "amx_tile", "fma")
    return {"cpu_model": model, "cpu_flags": [f for f in wanted if f in flags]}


def _ram_gib() -> float:
    try:
        for line in open("/proc/meminfo", encoding="utf-8"):
            if line.startswith("MemTotal:"):
                return round(int(line.split()[1]) / 1024**2, 1)
    except OSError:
        pass
    return float("nan")


def _git() -> dict[str, Any]:
    def git(*args: str) -> str:
        return subprocess.run(
            ["git", *args], cwd=ROOT, capture_output=True, text=True, check=False
        ).stdout.strip()

    return {"commit": git("rev-parse", "--short", "HEAD"), "dirty": bool(git("status", "-s"))}


def describe() -> dict[str, Any]:
    versions = {}
    for name in PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:
        usable = os.cpu_count() or 1
    return {
        "date_utc": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        **_cpuinfo(),
        "logical_cpus": os.cpu_count(),
        "usable_cpus": usable,
        "ram_gib": _ram_gib(),
        "os": f"{platform.system()} {platform.release()}",
        "python": sys.version.split()[0],
        "versions": versions,
        "source": _git(),
        "command": "python -m bench " + " ".join(sys.argv[1:]),
    }
