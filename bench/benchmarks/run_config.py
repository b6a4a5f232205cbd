"""``python -m bench run``'s settings (:class:`RunConfig`, its smoke mode) and the names every
part of it shares."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

from bench.harness.paths import ROOT
from bench.harness.server import settings
from bench.peers.llama_server import DEFAULT_QUANTS
from bench.reports.run_ratios import VARIANT  # the start of a variant arm's name


@dataclass
class RunConfig:
    smoke: bool = False
    shape: str = "smollm2-135m"
    prompt_tokens: int = 128
    new_tokens: int = 64
    reps: int = 6
    concurrency: list[int] = field(default_factory=lambda: [1, 2, 4, 8])
    rates: list[float] = field(default_factory=lambda: [0.5, 1.0, 2.0])
    load_requests: int = 16  # per concurrency level / rate (at least 2x the concurrency)
    histories: list[int] = field(default_factory=lambda: [512, 1024])
    chat_reps: int = 3
    turn_tokens: int = 32
    reply_tokens: int = 16
    strategies: list[str] = field(default_factory=lambda: ["generator", "engine", "batch"])
    # strategies that also get next-chat-turn rows (with reuse and GENAI_CACHE_SEQUENCES=0),
    # beside the default server's
    chat_strategies: list[str] = field(default_factory=lambda: ["batch"])
    peers: bool = True
    llama_server: bool = True  # llama.cpp's C++ server under load (with peers only)
    # llama-server's arms, one server each, by GGUF type (bench/peers/llama_server.py QUANTS)
    llama_quants: list[str] = field(default_factory=lambda: list(DEFAULT_QUANTS))
    # two more variants of ours on the build with every position's logits (the one n-gram
    # speculation can verify on): GENAI_SPECULATIVE_TOKENS=0 and the server's default
    speculation_arms: bool = False
    # more arms of ours, by name ("ours bs128"): the default server's settings with these
    # over them (``--variant bs128:GENAI_MODEL_DIR=...``), e.g. another build of the weights
    variants: dict[str, dict[str, str]] = field(default_factory=dict)
    inprocess_peers: bool = True  # transformers and llama-cpp-python (built on demand)
    threads: int = 0  # intra-op threads of every arm; 0: every CPU this process may use
    server_env: dict[str, str] = field(default_factory=dict)  # more settings, every server
    settings_sweep: bool = True
    protocol: str = "auto"  # auto | native | openai
    slo_ttft: float = 1.0
    slo_tpot: float = 0.1
    seed: int = 0
    out: Path = ROOT / "bench" / "results"

    @classmethod
    def smoke_config(cls, out: Path | None = None) -> RunConfig:
        return cls(
            smoke=True,
            shape="demo",
            prompt_tokens=32,
            new_tokens=8,
            reps=2,
            concurrency=[1, 2],
            rates=[4.0],
            load_requests=4,
            histories=[64],
            chat_reps=1,
            turn_tokens=8,
            reply_tokens=4,
            strategies=["generator", "batch"],
            peers=False,
            llama_server=False,
            settings_sweep=False,
            out=out or ROOT / "bench" / "results" / "smoke",
        )


LLAMA_SERVER = "llama-server"  # its availability (the build), and every arm's name's start
LLAMA_SERVER_ARM = "llama-server Q4_0"  # the Q4_0 arm (llama_server.arm_name("Q4_0"))
# Our arms with speculation off and on (RunConfig.speculation_arms)
SPEC_OFF, SPEC_ON = "speculation=off", "speculation=on"


def variant_arm(spec: str) -> tuple[str, dict[str, str]]:
    """``--variant`` ``[LABEL:]NAME=VALUE[,NAME=VALUE...]``: the arm's name ("ours LABEL",
    else "ours" and the settings themselves) and its settings."""
    label, _, rest = spec.partition(":") if ":" in spec.split("=", 1)[0] else ("", "", spec)
    return VARIANT + (label or rest), settings(rest)


def log(msg: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", flush=True)
