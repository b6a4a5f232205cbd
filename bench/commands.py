"""What each ``python -m bench`` subcommand does with its parsed options: fill the benchmark's
configuration from them and run it. A command imports its benchmark only when it runs (the
peers' and the plots' packages are needed only there)."""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from collections.abc import Callable
from pathlib import Path

from bench.harness.paths import ROOT


def run(args: argparse.Namespace) -> int:
    from bench.benchmarks.run import run as run_benchmark
    from bench.benchmarks.run_config import RunConfig, variant_arm

    cfg = RunConfig.smoke_config() if args.smoke else RunConfig(shape=args.shape)
    for name in ("reps", "prompt_tokens", "new_tokens", "concurrency", "rates", "histories"):
        if getattr(args, name) is not None:
            setattr(cfg, name, getattr(args, name))
    if args.requests is not None:
        cfg.load_requests = args.requests
    if args.threads is not None:
        cfg.threads = args.threads
    cfg.server_env = dict(item.split("=", 1) for item in args.env)
    if args.slo_ttft is not None:
        cfg.slo_ttft = args.slo_ttft
    if args.slo_tpot is not None:
        cfg.slo_tpot = args.slo_tpot
    if args.strategies is not None:
        cfg.strategies = args.strategies
    if args.no_peers:
        cfg.peers = False
    if args.no_llama_server:
        cfg.llama_server = False
    if args.llama_quant is not None:
        cfg.llama_quants = args.llama_quant
    cfg.speculation_arms = args.speculation
    cfg.variants = dict(variant_arm(spec) for spec in args.variant)
    cfg.inprocess_peers = not args.only_llama_server
    cfg.settings_sweep = cfg.settings_sweep and not args.no_sweep
    cfg.protocol = args.protocol
    stamp = time.strftime("%Y%m%d-%H%M%S")
    cfg.out = args.out or ROOT / "bench" / "results" / ("smoke" if args.smoke else stamp)
    run_benchmark(cfg)
    return 0


def agents(args: argparse.Namespace) -> int:
    from bench.benchmarks.agents import AgentConfig
    from bench.benchmarks.agents import run as run_agents
    from bench.benchmarks.run_config import variant_arm

    stamp = time.strftime("%Y%m%d-%H%M%S")
    out = args.out or ROOT / "bench" / "results" / f"agents-{stamp}"
    acfg = AgentConfig.smoke_config(out) if args.smoke else AgentConfig(out=out)
    acfg.shape = args.shape if not args.smoke else acfg.shape
    acfg.llama_flash_attn = args.llama_flash_attn
    for name in ("sessions", "prefix_tokens", "turns", "stagger", "user_tokens"):
        if getattr(args, name) is not None:
            setattr(acfg, name, getattr(args, name))
    for name in ("reply_tokens", "rounds", "docs"):
        if getattr(args, name) is not None:
            setattr(acfg, name, getattr(args, name))
    if args.no_llama_server:
        acfg.llama_server = False
    if args.llama_quant is not None:
        acfg.llama_quant = args.llama_quant
    acfg.responses = args.responses
    acfg.variants = dict(variant_arm(spec) for spec in args.variant)
    if args.no_docs:
        acfg.docs = None
    acfg.command = args.command_line
    run_agents(acfg)
    print((out / "results.md").read_text())
    return 0


def budget(args: argparse.Namespace) -> int:
    from bench.benchmarks.budget import run_budget
    from bench.harness.server import settings

    arms = {f"step={v}": {"GENAI_STEP_TOKENS": str(v)} for v in args.values}
    for variant in args.variant:
        arms[variant] = settings(variant)
    trees = {n: Path(p) for n, p in (tree.split("=", 1) for tree in args.tree)}
    table = run_budget(
        arms,
        args.concurrency,
        args.rounds,
        args.requests,
        shape=args.shape,
        out=args.out,
        trees=trees,
    )
    print(table)
    return 0


def spec(args: argparse.Namespace) -> int:
    from bench.benchmarks.spec import default_arms, parse_arm, run_spec

    arms = [parse_arm(a) for a in args.arm] or default_arms(args.llama_server is not None)
    print(
        run_spec(
            arms,
            tuple(args.workloads),
            tuple(args.conditions),
            tuple(args.concurrency),
            args.rounds,
            args.requests,
            args.max_tokens,
            args.equality,
            args.llama_server,
            args.out,
            args.threads,
            args.together,
            args.model,
        )
    )
    return 0


def embed(args: argparse.Namespace) -> int:
    from bench.benchmarks.embed import EmbedConfig
    from bench.benchmarks.embed import run as run_embed

    ecfg = EmbedConfig.smoke_config() if args.smoke else EmbedConfig()
    for name in ("model", "concurrency", "requests", "threads", "rounds", "out"):
        if getattr(args, name) is not None:
            setattr(ecfg, name, getattr(args, name))
    ecfg.peers = not args.no_peers
    print((ecfg.out / "embed.md").read_text() if run_embed(ecfg) else "")
    return 0


def report(args: argparse.Namespace) -> int:
    from bench.reports import run as run_report
    from bench.reports.run_ratios import ratios

    results = json.loads((args.folder / "results.json").read_text())
    results["ratios"] = ratios(results)
    (args.folder / "results.md").write_text(run_report.markdown(results))
    run_report.plots(results, args.folder)
    return 0


def profile(args: argparse.Namespace) -> int:
    from bench.probes.profile import profile as profile_server

    env = dict(item.split("=", 1) for item in args.env)
    print(profile_server(args.shape, args.seconds, args.out, env, args.protocol).read_text())
    return 0


def models(args: argparse.Namespace) -> int:
    from bench.benchmarks.model_costs import report as model_costs
    from bench.harness.model_cache import ensure_models

    print(model_costs(ensure_models("smollm2-135m")["int4"]))
    return 0


def images(args: argparse.Namespace) -> int:
    from bench.benchmarks.images import images as image_ttft

    print(image_ttft(args.reps, args.size))
    return 0


def transcribe(args: argparse.Namespace) -> int:
    from bench.benchmarks.transcribe import main as transcription_rtf

    print(transcription_rtf(args.shape, args.seconds, args.reps))
    return 0


def overlap(args: argparse.Namespace) -> int:
    from bench.benchmarks.overlap import overlap as overlap_steps
    from bench.harness.model_cache import ensure_models

    print(overlap_steps(ensure_models("smollm2-135m")["int4"], args.threads, args.prompt))
    return 0


def steps(args: argparse.Namespace) -> int:
    from bench.benchmarks.steps import steps as step_times
    from bench.harness.model_cache import ensure_models
    from bench.harness.paths import DEMO

    if args.model:
        folders = args.model
    elif args.shape == "demo":
        folders = [DEMO]
    else:  # a verify run reads every position's logits: the build speculation runs on
        folders = [ensure_models(args.shape)["int4-all-logits" if args.verify else "int4"]]
    if args.profile:
        from bench.probes.prefill_profile import decode_profile, table

        result = decode_profile(folders[0], max(args.rows), args.threads)
        print(table([result], [folders[0].name]))
        return 0
    if args.server:
        from bench.probes.server_steps import profile as server_profile
        from bench.probes.server_steps import table as server_table

        env = dict(item.split("=", 1) for item in args.env)
        result = server_profile(folders[0], max(args.rows), args.threads, env)
        print(server_table(result))
        print(json.dumps(result))
        return 0
    print(step_times(folders, args.rows, args.threads, verify=args.verify))
    return 0


def prefill(args: argparse.Namespace) -> int:
    from bench.benchmarks.prefill import PrefillConfig
    from bench.benchmarks.prefill import run as run_prefill
    from bench.peers.raw import usable_cpus

    cfg = PrefillConfig.smoke_config() if args.smoke else PrefillConfig(shape=args.shape)
    for name in ("lengths", "rounds", "threads", "model", "out"):
        if getattr(args, name) is not None:
            setattr(cfg, name, getattr(args, name))
    if args.profile:
        from bench.probes.prefill_profile import profile as operator_profile
        from bench.probes.prefill_profile import table

        threads = cfg.threads or usable_cpus()
        print(
            table(
                operator_profile(args.profile, cfg.lengths[0], threads),
                [f.name for f in args.profile],
            )
        )
        return 0
    from bench.benchmarks.prefill import parse_session

    cfg.llama = cfg.llama and not args.no_llama
    if args.llama_quant is not None:
        cfg.llama_quant = args.llama_quant
    cfg.server = not args.no_server
    cfg.cpu_time = args.cpu_time
    cfg.warm_up = not args.no_warm_up
    for text in args.session:
        name, folder, options = parse_session(text)
        cfg.sessions[name] = (folder, options)
    cfg.server_env = dict(item.split("=", 1) for item in args.env)
    print(run_prefill(cfg))
    return 0


def load(args: argparse.Namespace) -> int:
    from bench.harness.clients import RequestSpec, make_client
    from bench.harness.loadgen import run_load
    from bench.harness.prompts import words

    client = make_client(args.url.rstrip("/"), protocol=args.protocol, model=args.model)
    if args.ignore_eos:
        client.extra["ignore_eos"] = True

    async def go() -> list[dict[str, object]]:
        import httpx

        async with httpx.AsyncClient(timeout=60) as http:
            print(json.dumps(await client.probe(http)))
        out = []
        levels = [("c", c) for c in args.concurrency] + [("r", r) for r in args.rates]
        for i, (kind, level) in enumerate(levels):
            specs = [
                RequestSpec(
                    [{"role": "user", "content": words(args.prompt_words, 1000 * i + j)}],
                    args.max_tokens,
                )
                for j in range(args.requests)
            ]
            out.append(
                await run_load(
                    client,
                    specs,
                    concurrency=int(level) if kind == "c" else None,
                    rate=float(level) if kind == "r" else None,
                    stream=not args.no_stream,
                    desc=f"{kind}={level}",
                )
            )
            print(json.dumps(out[-1]))
        return out

    summaries = asyncio.run(go())
    if args.out:
        args.out.write_text(json.dumps(summaries, indent=2))
    return 0


COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "run": run,
    "agents": agents,
    "budget": budget,
    "spec": spec,
    "report": report,
    "profile": profile,
    "steps": steps,
    "overlap": overlap,
    "prefill": prefill,
    "models": models,
    "images": images,
    "transcribe": transcribe,
    "embed": embed,
    "load": load,
}
