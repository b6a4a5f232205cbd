"""``python -m bench agents``: an agent-shaped workload against this server and llama.cpp's
``llama-server`` on the same weights.

Agents send long prompts that start alike: every session opens with the same long system
prompt (instructions, tool definitions), then grows turn by turn. Here ``sessions`` sessions
start ``stagger`` seconds apart; each shares one system prompt of ``prefix_tokens`` tokens and
runs ``turns`` turns, each appending the previous answer and a new user message to its history.
Answers have a fixed length (``min_tokens`` = ``max_tokens`` on this server, ``ignore_eos`` on
llama-server), greedy. The prefix is fresh for every run and arm (a new text from its first
token), so no cache of an earlier run flatters either side. Both servers get the same thread
count; llama-server gets one slot per session and its defaults otherwise (flash attention
``auto`` unless ``--llama-flash-attn`` says otherwise, its host-RAM prompt cache included), and
the prompt as the token ids this server's chat template renders, so both read exactly the same
tokens.

With ``responses``, one more arm runs on this server: the same conversations on the Responses
API, each later turn sending only its new message with ``previous_response_id``, as agents on
that API do (the server keeps the conversation, and the tokens the model wrote).

Reported per arm: the makespan, the TTFT p50 of new sessions' first turns (sessions after the
first, whose prefix another session already holds), the TTFT p50 of later turns (a session's
own history), the inter-token latency median and p99, and the cached prompt tokens the server
reports in ``usage``; then the ratios ours ÷ llama-server, per round side by side.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from bench.harness.clients import Client, RequestResult, RequestSpec, make_client
from bench.harness.loadgen import percentiles
from bench.harness.paths import DEMO, ROOT
from bench.harness.prompts import PromptMaker, words
from bench.reports.agents import OURS, PEER, TARGETS, write

RESPONSES = "ours, Responses API"  # the same server, each turn chained by previous_response_id


@dataclass
class AgentConfig:
    sessions: int = 4
    prefix_tokens: int = 1024
    turns: int = 3
    stagger: float = 1.5  # seconds between session starts
    user_tokens: int = 32  # each later turn's new user message, about
    reply_tokens: int = 32  # each answer, exactly
    rounds: int = 2  # runs of the workload per arm, arms alternating
    shape: str = "smollm2-135m"
    llama_server: bool = True
    llama_quant: str = "Q4_0"  # llama-server's GGUF type (bench/peers/llama_server.py QUANTS)
    # llama-server's --flash-attn: "auto", its default. ("off" was used here for a while, after
    # a run on a loaded machine where "auto" decoded 1.5 tokens/s after a long prompt; on a
    # quiet machine "auto" is the faster of the two by far: docs/benchmarks.md.)
    llama_flash_attn: str = "auto"
    smoke: bool = False
    seed: int = 0
    out: Path = ROOT / "bench" / "results" / "agents"
    docs: Path | None = ROOT / "docs" / "bench"  # where the table and plot go; None: not
    command: str = "python -m bench agents"
    # More arms of this server, name -> settings (e.g. {"ours GENAI_STEP_TOKENS=0": {...}})
    variants: dict[str, dict[str, str]] = field(default_factory=dict)
    # One more arm on this server: the Responses API, each later turn sending only its new
    # message with previous_response_id (the server keeps the conversation and its tokens).
    responses: bool = False

    @classmethod
    def smoke_config(cls, out: Path) -> AgentConfig:
        return cls(
            sessions=2,
            prefix_tokens=64,
            turns=2,
            stagger=0.2,
            user_tokens=8,
            reply_tokens=4,
            rounds=1,
            shape="demo",
            llama_server=False,
            smoke=True,
            out=out,
            docs=None,
        )


# ---- the workload ------------------------------------------------------------------------
class Workload:
    """One run's conversations: a fresh shared prefix, and each session's messages."""

    def __init__(self, prompts: PromptMaker, cfg: AgentConfig, seed: int) -> None:
        self.prompts, self.cfg, self.seed = prompts, cfg, seed
        self.prefix = self._text(cfg.prefix_tokens, seed, f"Agent run {seed}. Instructions: ")

    def _text(self, tokens: int, seed: int, head: str) -> str:
        """``head`` + words, about ``tokens`` tokens as the tokenizer counts them."""
        n = max(1, tokens // 2)
        text = head
        for _ in range(8):
            text = head + words(n, seed)
            got = len(self.prompts.tok.encode(text))
            if abs(got - tokens) <= 2:
                break
            n = max(1, round(n * tokens / max(got, 1)))
        return text

    def user(self, session: int, turn: int) -> dict[str, str]:
        seed = self.seed * 1000 + session * 100 + turn
        return {"role": "user", "content": self._text(self.cfg.user_tokens, seed, f"#{seed} ")}

    def opening(self, session: int) -> list[dict[str, str]]:
        return [{"role": "system", "content": self.prefix}, self.user(session, 0)]

    def next_turn(
        self, history: list[dict[str, str]], answer: str, session: int, turn: int
    ) -> list[dict[str, str]]:
        """The history, the previous answer and a new user message."""
        return [*history, {"role": "assistant", "content": answer}, self.user(session, turn)]

    def spec(
        self, messages: list[dict[str, str]], client: Client, previous: str | None = None
    ) -> RequestSpec:
        """The request for ``messages``; on the Responses API, continuing ``previous``."""
        ids = self.prompts.render(messages) if client.protocol == "completions" else None
        return RequestSpec(messages, self.cfg.reply_tokens, ids, previous_response=previous)


@dataclass
class Turn:
    session: int
    turn: int
    sent: float  # seconds after the run's start
    ttft: float
    e2e: float
    itl: list[float] = field(default_factory=list)
    prompt_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int | None = None
    error: str | None = None


def _turn(session: int, turn: int, sent: float, res: RequestResult) -> Turn:
    return Turn(
        session,
        turn,
        sent,
        res.ttft,
        res.e2e,
        res.itl,
        res.prompt_tokens,
        res.output_tokens,
        res.cached_tokens,
        None if res.ok else (res.error or "failed"),
    )


async def run_workload(client: Client, http: Any, work: Workload) -> dict[str, Any]:
    """Every session of ``work`` against ``client``; its turns and the makespan."""
    cfg = work.cfg
    t0 = time.perf_counter()

    async def session(i: int) -> list[Turn]:
        await asyncio.sleep(i * cfg.stagger)
        messages, turns, previous = work.opening(i), [], None
        for k in range(cfg.turns):
            sent = time.perf_counter() - t0
            res = await client.request(http, work.spec(messages, client, previous), stream=True)
            previous = res.response_id
            turns.append(_turn(i, k, sent, res))
            if not res.ok:
                break
            messages = work.next_turn(messages, res.text, i, k + 1)
        return turns

    done = await asyncio.gather(*(session(i) for i in range(cfg.sessions)))
    makespan = time.perf_counter() - t0
    return {"makespan_s": makespan, "turns": [asdict(t) for s in done for t in s]}


def _median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def summarize(run: dict[str, Any]) -> dict[str, Any]:
    """The figures of one run (``run_workload``'s result)."""
    turns = [Turn(**t) for t in run["turns"]]
    ok = [t for t in turns if t.error is None]
    first_new = [t.ttft for t in ok if t.turn == 0 and t.session > 0]
    first_alone = [t.ttft for t in ok if t.turn == 0 and t.session == 0]
    later = [t.ttft for t in ok if t.turn > 0]
    itl = percentiles([g for t in ok for g in t.itl], (50, 99))
    cached = [t.cached_tokens for t in ok if t.cached_tokens is not None]
    return {
        "makespan_s": run["makespan_s"],
        "first_ttft_new_p50_s": _median(first_new),
        "first_ttft_first_session_s": _median(first_alone),
        "later_ttft_p50_s": _median(later),
        "itl_p50_s": itl["p50"],
        "itl_p99_s": itl["p99"],
        "cached_tokens": sum(cached) if cached else None,
        "cached_tokens_first_turns": sum(
            t.cached_tokens or 0 for t in ok if t.turn == 0 and t.session > 0
        ),
        "prompt_tokens": sum(t.prompt_tokens for t in ok),
        "output_tokens": sum(t.output_tokens for t in ok),
        "turns_ok": len(ok),
        "turns": len(turns),
        "errors": sorted({t.error for t in turns if t.error})[:3],
    }


def ratios(rounds: list[dict[str, dict[str, Any]]], arm: str = OURS) -> dict[str, dict[str, Any]]:
    """``arm`` (ours) ÷ llama-server per figure: the median over rounds of each round's ratio
    (both arms measured in the same round), with its target and whether it is met."""
    out: dict[str, dict[str, Any]] = {}
    for key, _, target in TARGETS:
        per_round = []
        for r in rounds:
            ours, peer = r.get(arm, {}).get(key), r.get(PEER, {}).get(key)
            if ours is not None and peer and peer == peer and ours == ours:
                per_round.append(ours / peer)
        value = _median(per_round)
        met = None if target is None or value != value else value <= target
        out[key] = {"ratio": value, "per_round": per_round, "target": target, "met": met}
    return out


# ---- the run -----------------------------------------------------------------------------
def _log(msg: str) -> None:
    print(f"[agents {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def run(cfg: AgentConfig) -> dict[str, Any]:
    """Start both servers, run the workload ``rounds`` times per arm (arms alternating, a
    fresh prefix each time), write results.json, and the table and plot."""
    import onnxruntime_genai as og

    from bench.harness import machine
    from bench.harness.server import ServerProcess, start_all
    from bench.peers.raw import usable_cpus

    threads = usable_cpus()
    model = DEMO if cfg.smoke else _model(cfg.shape)
    prompts = PromptMaker(og.Tokenizer(og.Model(str(model))))
    results: dict[str, Any] = {
        "meta": machine.describe(),
        "config": {k: str(v) for k, v in asdict(cfg).items()},
        "availability": {},
        "rounds": [],
    }
    mine = [ServerProcess(OURS, {"GENAI_MODEL_DIR": str(model)})] + [
        ServerProcess(name, {"GENAI_MODEL_DIR": str(model), **env})
        for name, env in cfg.variants.items()
    ]
    servers: dict[str, Any] = {}
    clients: dict[str, Client] = {}
    try:
        healthy = start_all(mine)
        servers.update((s.name, s) for s in healthy)
        if len(healthy) != len(mine):
            raise RuntimeError("; ".join(f"{s.name}: {s.error}" for s in mine if s.error))
        for s in mine:
            clients[s.name] = make_client(s.url, protocol="openai")
            asyncio.run(_probe(clients[s.name]))
        for s in mine if cfg.responses else ():  # as an agent on the Responses API talks
            name = RESPONSES + s.name[len(OURS) :]
            clients[name] = make_client(s.url, protocol="responses")
            asyncio.run(_probe(clients[name]))
        if cfg.llama_server:
            peer, why = _llama_server(cfg, model, threads, results)
            results["availability"][PEER] = why or "ok"
            if peer is not None:
                servers[PEER], clients[PEER] = peer
        else:
            results["availability"][PEER] = "not available: not requested"
        for r in range(cfg.rounds):
            order = list(clients) if r % 2 == 0 else list(reversed(clients))
            row: dict[str, Any] = {}
            for i, name in enumerate(order):
                seed = cfg.seed * 10_000 + 100 * r + 10 * i + 1
                work = Workload(prompts, cfg, seed)
                _log(f"round {r + 1}/{cfg.rounds}: {name}")
                raw = asyncio.run(_one(clients[name], work))
                row[name] = summarize(raw) | {"raw": raw}
                time.sleep(1.0)  # let the other server's spinning threads go idle
            results["rounds"].append(row)
    finally:
        for srv in [*mine, *servers.values()]:
            srv.stop()
    results["summary"] = {
        name: {
            key: _median([r[name][key] for r in results["rounds"] if r[name][key] is not None])
            for key, _, _ in TARGETS
        }
        for name in clients
    }
    results["ratios"] = ratios(results["rounds"])
    results["ratios_by_arm"] = {
        name: ratios(results["rounds"], name) for name in clients if name not in (OURS, PEER)
    }
    cfg.out.mkdir(parents=True, exist_ok=True)
    (cfg.out / "results.json").write_text(json.dumps(results, indent=2, default=str))
    write(results, cfg.out, cfg.docs)
    return results


def _model(shape: str) -> Path:
    from bench.harness.model_cache import ensure_models

    return ensure_models(shape, _log)["int4"]


async def _probe(client: Client) -> None:
    import httpx

    async with httpx.AsyncClient(timeout=60) as http:
        await client.probe(http)


async def _one(client: Client, work: Workload) -> dict[str, Any]:
    import httpx

    async with httpx.AsyncClient(timeout=client.timeout) as http:
        return await run_workload(client, http, work)


def _llama_server(
    cfg: AgentConfig, model: Path, threads: int, results: dict[str, Any]
) -> tuple[tuple[Any, Client] | None, str | None]:
    """llama-server on a GGUF of the same weights (``cfg.llama_quant``): a slot per session,
    each holding a whole session, the same thread count; else (None, why not)."""
    from bench.peers import libraries as peers
    from bench.peers import llama_server

    bins, why = llama_server.ensure_binaries(_log)
    if bins is None:
        return None, f"not available: {why}"
    try:
        gguf = peers.ensure_gguf(model / "hf", _log, bins.quantize, threads, quant=cfg.llama_quant)
    except Exception as exc:
        return None, f"not available: {type(exc).__name__}: {exc}"[:500]
    need = cfg.prefix_tokens + cfg.turns * (cfg.user_tokens + cfg.reply_tokens + 32) + 64
    srv = llama_server.LlamaServer(
        PEER,
        {},
        binary=bins.server,
        gguf=gguf,
        threads=threads,
        parallel=cfg.sessions,
        ctx_per_slot=-(-need // 256) * 256,
        extra_args=["--flash-attn", cfg.llama_flash_attn],
    )
    results["versions_peers"] = {PEER: {**bins.info, "gguf": cfg.llama_quant}}
    srv.start()
    if not srv.wait_ready():
        srv.stop()
        return None, f"not available: {srv.error}"[:500]
    cmd = [Path(srv.command()[0]).name, *srv.command()[1:]]
    bins.info["command"] = " ".join(cmd).replace(str(gguf), gguf.name)
    extra = dict(llama_server.REQUEST_EXTRA, cache_prompt=True)
    return (srv, make_client(srv.url, protocol="completions", model="bench", extra=extra)), None


__all__ = ["AgentConfig", "Workload", "ratios", "run", "run_workload", "summarize"]
