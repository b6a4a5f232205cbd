"""Command line: ``python -m bench run [--smoke]``, ``python -m bench load --url URL``, ..."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from bench.commands import COMMANDS
from bench.harness.model_cache import BENCH_SHAPES
from bench.harness.paths import ROOT
from bench.peers.llama_server import DEFAULT_QUANTS, QUANTS, quant_arms

LLAMA_QUANT_HELP = (
    f"llama-server's arms, by GGUF type of the same weights: a comma list of {', '.join(QUANTS)}"
    f" (default {','.join(DEFAULT_QUANTS)})"
)


def _floats(s: str) -> list[float]:
    return [float(x) for x in s.split(",") if x]


def _ints(s: str) -> list[int]:
    return [int(x) for x in s.split(",") if x]


def _names(s: str) -> list[str]:
    return [x.strip() for x in s.split(",") if x.strip()]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    sub = ap.add_subparsers(dest="cmd", required=True)

    r = sub.add_parser("run", help="the whole benchmark: raw loop, server, load, chat, peers")
    r.add_argument("--smoke", action="store_true", help="CI mode: demo model, a few requests")
    r.add_argument("--shape", default="smollm2-135m", choices=BENCH_SHAPES)
    r.add_argument("--reps", type=int, help="rounds of the single-stream section (default 6)")
    r.add_argument("--prompt-tokens", type=int)
    r.add_argument("--new-tokens", type=int)
    r.add_argument("--concurrency", type=_ints, help="e.g. 1,2,4,8")
    r.add_argument("--rates", type=_floats, help="Poisson arrival rates, requests/s")
    r.add_argument("--requests", type=int, help="requests per load level")
    r.add_argument("--histories", type=_ints, help="chat history lengths, tokens")
    r.add_argument(
        "--strategies",
        type=lambda v: [x for x in v.split(",") if x],
        help="server scheduler strategies under load (default generator,engine,batch)",
    )
    r.add_argument(
        "--no-peers", action="store_true", help="skip transformers, llama.cpp and llama-server"
    )
    r.add_argument("--no-llama-server", action="store_true", help="skip llama.cpp's llama-server")
    r.add_argument("--llama-quant", type=quant_arms, help=LLAMA_QUANT_HELP)
    r.add_argument(
        "--speculation",
        action="store_true",
        help="two more arms of ours on the build with every position's logits: "
        "GENAI_SPECULATIVE_TOKENS=0 and the server's default (the export itself cannot verify "
        "drafts, so its arms run without speculation)",
    )
    r.add_argument(
        "--variant",
        action="append",
        default=[],
        help='[LABEL:]NAME=VALUE[,NAME=VALUE...]: one more arm of ours ("ours LABEL"), the '
        "default server with these settings, e.g. bs128:GENAI_MODEL_DIR=<another build>; "
        "repeat for more",
    )
    r.add_argument(
        "--only-llama-server",
        action="store_true",
        help="of the peers, llama-server only: no transformers, no llama-cpp-python build",
    )
    r.add_argument(
        "--no-sweep", action="store_true", help="skip the engine-settings arms (threads, ...)"
    )
    r.add_argument("--threads", type=int, help="intra-op threads of every arm (default: all)")
    r.add_argument("--env", action="append", default=[], help="NAME=VALUE for every server")
    r.add_argument("--protocol", choices=["auto", "native", "openai"], default="auto")
    r.add_argument("--slo-ttft", type=float, help="seconds (default 1.0)")
    r.add_argument("--slo-tpot", type=float, help="seconds (default 0.1)")
    r.add_argument("--out", type=Path, help="output folder (default bench/results/<time>)")

    a = sub.add_parser("agents", help="agent sessions sharing a long prefix, vs llama-server")
    a.add_argument("--smoke", action="store_true", help="demo model, no llama-server, seconds")
    a.add_argument("--shape", default="smollm2-135m", choices=BENCH_SHAPES)
    a.add_argument("--sessions", type=int, help="sessions (default 4)")
    a.add_argument("--prefix-tokens", type=int, help="shared system prompt, tokens (default 1024)")
    a.add_argument("--turns", type=int, help="turns per session (default 3)")
    a.add_argument("--stagger", type=float, help="seconds between session starts (default 1.5)")
    a.add_argument("--user-tokens", type=int, help="each new user message, tokens (default 32)")
    a.add_argument("--reply-tokens", type=int, help="each answer, tokens (default 32)")
    a.add_argument("--rounds", type=int, help="runs of the workload per arm (default 2)")
    a.add_argument("--no-llama-server", action="store_true", help="this server alone")
    a.add_argument(
        "--llama-quant",
        type=lambda v: quant_arms(v)[0],
        choices=QUANTS,
        help="llama-server's GGUF type (default Q4_0)",
    )
    a.add_argument(
        "--responses",
        action="store_true",
        help="one more arm: this server on the Responses API, turns chained by "
        "previous_response_id",
    )
    a.add_argument(
        "--llama-flash-attn",
        choices=["off", "on", "auto"],
        default="auto",
        help="llama-server's --flash-attn (default: auto, its own default)",
    )
    a.add_argument("--out", type=Path, help="output folder (default bench/results/agents-<time>)")
    a.add_argument("--docs", type=Path, help="table and plot folder (default docs/bench)")
    a.add_argument("--no-docs", action="store_true", help="write the table and plot only to --out")
    a.add_argument(
        "--variant",
        action="append",
        default=[],
        help="another arm of this server with these settings, e.g. GENAI_STEP_TOKENS=0",
    )

    b = sub.add_parser("budget", help="GENAI_STEP_TOKENS values side by side under load")
    b.add_argument("--shape", default="smollm2-135m", choices=BENCH_SHAPES)
    b.add_argument("--values", type=_ints, default=[0, 32, 48, 64], help="first: the baseline")
    b.add_argument("--concurrency", type=_ints, default=[1, 4, 8])
    b.add_argument("--rounds", type=int, default=2)
    b.add_argument("--requests", type=int, default=16, help="requests per level and round")
    b.add_argument(
        "--variant",
        action="append",
        default=[],
        help="another arm: server settings A=1[,B=2], e.g. GENAI_PREFILL_OVERLAP=1",
    )
    b.add_argument(
        "--tree",
        action="append",
        default=[],
        help="another arm: NAME=PATH, a checkout of another commit of this server",
    )
    b.add_argument("--out", type=Path, help="write budget.json and budget.md here")

    sp = sub.add_parser(
        "spec", help="n-gram speculation: ours on/off, og's n-gram, llama-server's, per workload"
    )
    sp.add_argument("--workloads", type=_names, default=["edit", "diff", "free", "copy"])
    sp.add_argument("--conditions", type=_names, default=["greedy", "seeded"])
    sp.add_argument("--concurrency", type=_ints, default=[1, 2, 4])
    sp.add_argument("--rounds", type=int, default=3)
    sp.add_argument("--requests", type=int, default=8, help="requests per level and round")
    sp.add_argument("--max-tokens", type=int, default=160)
    sp.add_argument("--equality", type=int, default=0, help="prompts for the equality check")
    sp.add_argument(
        "--llama-server", type=Path, help="a built llama-server: adds its arms (none, n-gram)"
    )
    sp.add_argument(
        "--arm",
        action="append",
        default=[],
        help="NAME:A=1[,B=2] our server's settings, NAME:llama:ARGS llama-server's, or "
        "NAME:ARM+JSON arm ARM's server with these request fields, with @1,2 for the levels "
        "it runs (default: off, on, og's n-gram at 1, llama-server's with --llama-server); "
        "the first is the baseline",
    )
    sp.add_argument(
        "--threads", type=int, help="intra-op threads of every server (default: every CPU)"
    )
    sp.add_argument(
        "--together",
        action="store_true",
        help="run the arms of a level at the same time (same outside load), not in turn",
    )
    sp.add_argument(
        "--model", type=Path, help="a model folder for every arm (default: the demo model)"
    )
    sp.add_argument("--out", type=Path, help="write spec.json and spec.md here")

    rp = sub.add_parser("report", help="redo results.md and the plots from a results.json")
    rp.add_argument("folder", type=Path)

    pr = sub.add_parser("profile", help="py-spy the server while it serves one stream")
    pr.add_argument("--shape", default="smollm2-135m", choices=["demo", *BENCH_SHAPES])
    pr.add_argument("--seconds", type=int, default=20)
    pr.add_argument("--protocol", choices=["native", "openai"], default="native")
    pr.add_argument("--env", action="append", default=[], help="NAME=VALUE for the server")
    pr.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "profile")

    st = sub.add_parser("steps", help="the batch decoder's step time against its row count")
    st.add_argument("--shape", default="smollm2-135m", choices=["demo", *BENCH_SHAPES])
    st.add_argument("--rows", type=_ints, default=[1, 2, 4, 8])
    st.add_argument("--threads", type=int, default=2)
    st.add_argument(
        "--model", type=Path, action="append", default=[], help="a folder instead; repeat"
    )
    st.add_argument("--verify", type=int, default=0, help="also batch-1 runs of 1+k, k<=this")
    st.add_argument(
        "--server",
        action="store_true",
        help="instead: onnxruntime's profile of the server's steps while max(--rows) streams "
        "decode, per operator, and the time between its runs (bench/probes/server_steps.py)",
    )
    st.add_argument("--env", action="append", default=[], help="NAME=VALUE for the server")
    st.add_argument(
        "--profile",
        action="store_true",
        help="instead: onnxruntime's per-operator profile of a bare decode step of max(--rows) "
        "rows (bench/probes/prefill_profile.py)",
    )

    ov = sub.add_parser("overlap", help="decode steps beside a prefill, by thread split")
    ov.add_argument("--threads", type=int, default=2)
    ov.add_argument("--prompt", type=int, default=128, help="prefill tokens")

    pf = sub.add_parser("prefill", help="prompt tokens/s: server, bare session, llama.cpp")
    pf.add_argument("--smoke", action="store_true", help="demo model, short prompts, no llama.cpp")
    pf.add_argument("--shape", default="smollm2-135m", choices=BENCH_SHAPES)
    pf.add_argument("--lengths", type=_ints, help="prompt tokens (default 128,512,2048)")
    pf.add_argument("--rounds", type=int, help="rounds, every arm once per length (default 3)")
    pf.add_argument("--threads", type=int, help="intra-op threads, every arm (default: all)")
    pf.add_argument(
        "--no-warm-up",
        action="store_true",
        help="no unrecorded first round (list a short length first to warm the arms instead: "
        "an 8k-token prompt at 1B takes minutes an arm on 2 cores)",
    )
    pf.add_argument("--model", type=Path, help="another folder of the same weights (a variant)")
    pf.add_argument("--env", action="append", default=[], help="NAME=VALUE for the server")
    pf.add_argument("--no-llama", action="store_true", help="skip llama-server and llama-bench")
    pf.add_argument(
        "--llama-quant",
        type=lambda v: quant_arms(v)[0],
        choices=QUANTS,
        help="llama-server's and llama-bench's GGUF type (default Q4_0)",
    )
    pf.add_argument("--no-server", action="store_true", help="skip this server's arm")
    pf.add_argument(
        "--cpu-time",
        action="store_true",
        help="also tokens per CPU second: the session arms' process, the servers' processes "
        "(steadier than wall time on a busy machine; spinning threads count too)",
    )
    pf.add_argument(
        "--session",
        action="append",
        default=[],
        help="another bare-session arm: NAME=FOLDER[,KEY=VALUE...] (session options such as "
        "session.intra_op.allow_spinning=0 or intra_op_num_threads=1; chunk=N: runs of N tokens)",
    )
    pf.add_argument(
        "--profile",
        type=Path,
        action="append",
        default=[],
        help="instead: onnxruntime's per-operator profile of one prompt (the first --lengths) "
        "in this folder; repeat for columns side by side (e.g. before, after)",
    )
    pf.add_argument("--out", type=Path, help="output folder (default bench/results/prefill-<time>)")

    sub.add_parser("models", help="RSS per extra loaded model; adapter vs base TTFT")
    im = sub.add_parser("images", help="TTFT of a chat with an image vs the same text alone")
    im.add_argument("--reps", type=int, default=10)
    im.add_argument("--size", type=int, default=448, help="image side, pixels")

    tr = sub.add_parser("transcribe", help="real-time factor of a clip: server vs direct loop")
    tr.add_argument("--shape", choices=["test", "tiny"], default="test")
    tr.add_argument("--seconds", type=float, default=30.0, help="clip length")
    tr.add_argument("--reps", type=int, default=5, help="requests per arm")

    e = sub.add_parser("embed", help="embeddings: ours vs sentence-transformers (bench/embed.py)")
    e.add_argument("--smoke", action="store_true", help="the tiny test embedder, few requests")
    e.add_argument("--model", type=Path, help="an embedder folder (default: MiniLM-shaped)")
    e.add_argument("--concurrency", type=_ints, help="requests in flight (default 1,8,32)")
    e.add_argument("--requests", type=int, help="requests per level (default 64)")
    e.add_argument("--threads", type=int, help="intra-op threads, every arm (default 2)")
    e.add_argument("--rounds", type=int, help="rounds per level, arms interleaved (default 3)")
    e.add_argument("--no-peers", action="store_true", help="skip sentence-transformers")
    e.add_argument("--out", type=Path, help="output folder (default bench/results/embed)")

    g = sub.add_parser("load", help="load-test any server (this one or OpenAI-compatible)")
    g.add_argument("--url", required=True, help="base URL, e.g. http://127.0.0.1:8002")
    g.add_argument("--protocol", choices=["native", "openai", "completions"], default="openai")
    g.add_argument(
        "--ignore-eos",
        action="store_true",
        help="send ignore_eos (llama-server, vLLM): exactly --max-tokens new tokens",
    )
    g.add_argument("--model", help="model name for the OpenAI protocol (default: /v1/models)")
    g.add_argument("--concurrency", type=_ints, default=[1, 2, 4])
    g.add_argument("--rates", type=_floats, default=[])
    g.add_argument("--requests", type=int, default=16)
    g.add_argument("--prompt-words", type=int, default=96)
    g.add_argument("--max-tokens", type=int, default=64)
    g.add_argument("--no-stream", action="store_true")
    g.add_argument("--out", type=Path, help="write the summaries as JSON here")
    args = ap.parse_args(argv)
    args.command_line = "python -m bench " + " ".join(argv if argv is not None else sys.argv[1:])
    return COMMANDS[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main())
