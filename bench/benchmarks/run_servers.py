"""``python -m bench run``'s servers: every variant of this server started at once (idle
servers cost no CPU), llama.cpp's ``llama-server`` on the Q4_0 GGUF of the same weights, and a
client for each. A variant that does not start (a scheduler strategy this server does not have:
it exits with status 2, "Invalid settings") is recorded as "not available: ..." in
``availability`` and the run goes on without it; so is a llama-server that cannot be built."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from bench.benchmarks.run_config import LLAMA_SERVER, RunConfig, log
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
    if "GENAI_CACHE_SEQUENCES" in env_names:
        wanted["no-reuse"] = {**wanted["default"], "GENAI_CACHE_SEQUENCES": "0"}
        for strategy in cfg.chat_strategies:
            if f"scheduler={strategy}" in wanted:
                wanted[f"scheduler={strategy} no-reuse"] = {
                    **wanted[f"scheduler={strategy}"],
                    "GENAI_CACHE_SEQUENCES": "0",
                }
    else:
        avail["no-reuse"] = "not available: the server has no GENAI_CACHE_SEQUENCES"
    if cfg.settings_sweep:
        wanted["threads=1"] = {"GENAI_MODEL_DIR": model, "GENAI_INTRA_OP_THREADS": "1"}
        spin0 = session_variant(models["int4"], "spin0", {"session.intra_op.allow_spinning": "0"})
        wanted["spinning=0"] = {"GENAI_MODEL_DIR": str(spin0)}
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


def start_llama_server(
    cfg: RunConfig, models: dict[str, Path], threads: int, results: dict[str, Any]
) -> tuple[ServerProcess, Client] | None:
    """llama.cpp's C++ server on the Q4_0 GGUF of the same weights: as many slots as the
    most requests in flight, continuous batching, the same thread count as every arm; None
    (and why, in ``results["availability"]``) when it cannot be built or started."""
    from bench.peers import libraries as peers
    from bench.peers import llama_server

    avail = results["availability"]
    bins, why = llama_server.ensure_binaries(log)
    if bins is None:
        avail[LLAMA_SERVER] = f"not available: {why}"[:500]
        log(f"llama-server not available: {why}")
        return None
    results.setdefault("versions_peers", {})[LLAMA_SERVER] = bins.info
    try:
        gguf = peers.ensure_gguf(models["hf"], log, bins.quantize, threads)
    except Exception as exc:
        avail[LLAMA_SERVER] = f"not available: {type(exc).__name__}: {exc}"[:500]
        log(avail[LLAMA_SERVER])
        return None
    per_slot = max(512, -(-(cfg.prompt_tokens + cfg.new_tokens + 64) // 256) * 256)
    srv = llama_server.LlamaServer(
        LLAMA_SERVER,
        {},
        binary=bins.server,
        gguf=gguf,
        threads=threads,
        parallel=max(cfg.concurrency),
        ctx_per_slot=per_slot,
    )
    cmd = [Path(srv.command()[0]).name, *srv.command()[1:]]
    bins.info["command"] = " ".join(cmd).replace(str(gguf), gguf.name)
    srv.start()
    if not srv.wait_ready():
        avail[LLAMA_SERVER] = f"not available: {srv.error}"[:500]
        log(avail[LLAMA_SERVER])
        srv.stop()
        return None
    client = make_client(
        srv.url, protocol="completions", model="bench", extra=dict(llama_server.REQUEST_EXTRA)
    )
    avail[LLAMA_SERVER] = "ok"
    log(f"llama-server ready: {max(cfg.concurrency)} slots, {threads} threads")
    return srv, client
