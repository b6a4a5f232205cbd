"""``python -m bench run``'s servers: every variant of this server started at once (idle
servers cost no CPU), llama.cpp's ``llama-server`` on GGUFs of the same weights (one server
per type asked for: Q4_0, Q4_K_M), and a client for each. A variant that does not start (a
scheduler strategy this server does not have: it exits with status 2, "Invalid settings") is
recorded as "not available: ..." in ``availability`` and the run goes on without it; so is a
llama-server that cannot be built."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from bench.benchmarks.run_config import LLAMA_SERVER, SPEC_OFF, SPEC_ON, RunConfig, log
from bench.harness.clients import Client, make_client
from bench.harness.model_cache import session_variant
from bench.harness.server import ServerProcess, server_settings_fields, start_all


def start_servers(
    cfg: RunConfig, models: dict[str, Path], avail: dict[str, Any]
) -> tuple[dict[str, ServerProcess], dict[str, Client]]:
    """The server variants that started, and a client for each, by variant name."""
    env_names = server_settings_fields()
    model = str(models["int4"])
    wanted: dict[str, dict[str, str]] = {"default": {"GENAI_MODEL_DIR": model, **cfg.server_env}}
    if cfg.threads:  # else each server takes every usable CPU, as the raw loop does
        wanted["default"]["GENAI_INTRA_OP_THREADS"] = str(cfg.threads)
    for strategy in cfg.strategies:
        if "GENAI_SCHEDULER" in env_names:
            wanted[f"scheduler={strategy}"] = {
                **wanted["default"],
                "GENAI_SCHEDULER": strategy,
            }
        else:
            avail[f"scheduler={strategy}"] = "not available: the server has no GENAI_SCHEDULER"
    if not cfg.histories:  # the no-reuse variants serve the next-chat-turn section only
        avail["no-reuse"] = "not available: no chat histories asked for"
    elif "GENAI_CACHE_SEQUENCES" in env_names:
        wanted["no-reuse"] = {**wanted["default"], "GENAI_CACHE_SEQUENCES": "0"}
        for strategy in cfg.chat_strategies:
            if f"scheduler={strategy}" in wanted:
                wanted[f"scheduler={strategy} no-reuse"] = {
                    **wanted[f"scheduler={strategy}"],
                    "GENAI_CACHE_SEQUENCES": "0",
                }
    else:
        avail["no-reuse"] = "not available: the server has no GENAI_CACHE_SEQUENCES"
    if cfg.speculation_arms and "int4-all-logits" in models:
        every = {**wanted["default"], "GENAI_MODEL_DIR": str(models["int4-all-logits"])}
        wanted[SPEC_OFF] = {**every, "GENAI_SPECULATIVE_TOKENS": "0"}
        wanted[SPEC_ON] = every
    for name, env in cfg.variants.items():
        wanted[name] = {**wanted["default"], **env}
    if cfg.settings_sweep:
        wanted["threads=1"] = {"GENAI_MODEL_DIR": model, "GENAI_INTRA_OP_THREADS": "1"}
        spin0 = session_variant(models["int4"], "spin0", {"session.intra_op.allow_spinning": "0"})
        wanted["spinning=0"] = {"GENAI_MODEL_DIR": str(spin0)}
        if "int4-acc0" in models:  # not every shape's BuildPlan builds it
            wanted["acc-level-default"] = {"GENAI_MODEL_DIR": str(models["int4-acc0"])}
    log(f"starting {len(wanted)} server variants: {', '.join(wanted)}")
    procs = [ServerProcess(name, env) for name, env in wanted.items()]
    healthy = start_all(procs)
    servers: dict[str, ServerProcess] = {}
    for p in procs:
        if p in healthy:
            servers[p.name] = p
            avail[p.name] = "ok"
        else:
            avail[p.name] = f"not available: {p.error}"
            log(f"server {p.name} not available: {p.error}")
            p.stop()
    routes = servers["default"].routes() if "default" in servers else set()
    avail["routes"] = sorted(routes)
    clients = {name: client_for(cfg.protocol, srv.url, routes) for name, srv in servers.items()}
    return servers, clients


def client_for(protocol: str, url: str, routes: set[str]) -> Client:
    """A client of ``protocol`` ("auto": OpenAI's where the server has it, else the native
    API); an OpenAI client has probed whether the server takes ``min_tokens``."""
    if protocol == "auto":
        protocol = "openai" if "/v1/chat/completions" in routes else "native"
    client = make_client(url, protocol=protocol)
    if protocol == "openai":
        asyncio.run(_probe(client))
    return client


async def _probe(client: Client) -> None:
    import httpx

    async with httpx.AsyncClient(timeout=60) as http:
        await client.probe(http)


def start_llama_servers(
    cfg: RunConfig, models: dict[str, Path], threads: int, results: dict[str, Any]
) -> dict[str, tuple[ServerProcess, Client]]:
    """llama.cpp's C++ server on a GGUF of the same weights, one per type in
    ``cfg.llama_quants`` (by arm name, ``llama-server Q4_0``): as many slots as the most
    requests in flight, continuous batching, the same thread count as every arm. An arm that
    cannot be built or started is left out, with why in ``results["availability"]`` (under
    its name, and under ``llama-server`` when the binary itself cannot be built)."""
    from bench.peers import llama_server

    avail = results["availability"]
    bins, why = llama_server.ensure_binaries(log)
    if bins is None:
        avail[LLAMA_SERVER] = f"not available: {why}"[:500]
        log(f"llama-server not available: {why}")
        return {}
    results.setdefault("versions_peers", {})[LLAMA_SERVER] = bins.info
    found: dict[str, tuple[ServerProcess, Client]] = {}
    for quant in cfg.llama_quants:
        name = llama_server.arm_name(quant)
        one = _start_llama_server(cfg, models, threads, bins, quant, name)
        if isinstance(one, str):
            avail[name] = one
            log(f"{name} {one}")
        else:
            avail[name] = "ok"
            found[name] = one
    avail[LLAMA_SERVER] = "ok" if found else "not available: no arm started"
    return found


def _start_llama_server(
    cfg: RunConfig, models: dict[str, Path], threads: int, bins: Any, quant: str, name: str
) -> tuple[ServerProcess, Client] | str:
    from bench.peers import libraries as peers
    from bench.peers import llama_server

    try:
        gguf = peers.ensure_gguf(models["hf"], log, bins.quantize, threads, quant=quant)
    except Exception as exc:
        return f"not available: {type(exc).__name__}: {exc}"[:500]
    per_slot = max(512, -(-(cfg.prompt_tokens + cfg.new_tokens + 64) // 256) * 256)
    srv = llama_server.LlamaServer(
        name,
        {},
        binary=bins.server,
        gguf=gguf,
        threads=threads,
        parallel=max(cfg.concurrency),
        ctx_per_slot=per_slot,
    )
    cmd = [Path(srv.command()[0]).name, *srv.command()[1:]]
    bins.info.setdefault("commands", {})[name] = " ".join(cmd).replace(str(gguf), gguf.name)
    srv.start()
    if not srv.wait_ready():
        srv.stop()
        return f"not available: {srv.error}"[:500]
    client = make_client(
        srv.url, protocol="completions", model="bench", extra=dict(llama_server.REQUEST_EXTRA)
    )
    log(f"{name} ready: {max(cfg.concurrency)} slots, {threads} threads")
    return srv, client
