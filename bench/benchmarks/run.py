"""``python -m bench run``: every measurement, interleaved and repeated, in one process.

Order of work: build/reuse the models; start every server variant at once, and llama.cpp's
``llama-server`` (bench/benchmarks/run_servers.py); then, for each section (single stream,
load, next chat turn), repeat rounds in which each arm (raw loop, server variants, peers) runs
once in a shuffled order, so drift on a shared machine spreads over all arms.

A server variant or a peer that is not available is recorded as "not available: ..." in
``availability`` and the run goes on without it. The settings: bench/benchmarks/run_config.py.
"""

from __future__ import annotations

import asyncio
import json
import random
import statistics
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

from bench.benchmarks.run_config import LLAMA_SERVER, SPEC_OFF, SPEC_ON, RunConfig, log
from bench.benchmarks.run_servers import start_llama_servers, start_servers
from bench.harness import machine
from bench.harness.clients import Client, RequestSpec, make_client
from bench.harness.loadgen import SLO, run_load
from bench.harness.model_cache import ensure_models
from bench.harness.paths import DEMO
from bench.harness.prompts import PromptMaker
from bench.harness.server import ServerProcess, cpu_seconds
from bench.peers.raw import RawEngine, usable_cpus
from bench.reports import run as report
from bench.reports.run_ratios import ratios

try:
    from tqdm import tqdm
except ImportError:
    tqdm = None


def _stats(values: list[float]) -> dict[str, float]:
    vals = [v for v in values if v == v]
    if not vals:
        return {"median": float("nan"), "min": float("nan"), "max": float("nan"), "n": 0}
    return {
        "median": statistics.median(vals),
        "min": min(vals),
        "max": max(vals),
        "n": len(vals),
    }


class Bench:
    def __init__(self, cfg: RunConfig) -> None:
        self.cfg = cfg
        self.rng = random.Random(cfg.seed)
        self.results: dict[str, Any] = {"availability": {}}
        self.servers: dict[str, ServerProcess] = {}
        self.clients: dict[str, Client] = {}
        self.threads = cfg.threads or usable_cpus()
        self.loop = asyncio.new_event_loop()
        self._prompt_seed = 1000
        self.peer_procs: list[Any] = []
        self.llama_arms: list[str] = []  # llama-server's arms that started, by name
        self.http: Any = None

    # ---- setup ---------------------------------------------------------------------------
    def setup(self) -> None:
        cfg = self.cfg
        if cfg.smoke:  # the demo model computes every position's logits: it speculates
            self.models = {"int4": DEMO, "int4-all-logits": DEMO}
        else:
            self.models = ensure_models(cfg.shape, log)
        self.raw = RawEngine(self.models["int4"], threads=self.threads)
        self.prompts = PromptMaker(self.raw.tokenizer)
        self.messages, self.prompt_ids = self.prompts.chat(cfg.prompt_tokens, seed=10_000)
        self.results["availability"]["eos_ids"] = sorted(
            int(t) for t in self.raw.tokenizer.eos_token_ids
        )
        self._start_servers()
        if cfg.peers and cfg.llama_server:
            self._start_llama_servers()
        else:
            self.results["availability"][LLAMA_SERVER] = "not available: not requested"

    def _start_servers(self) -> None:
        avail = self.results["availability"]
        self.servers, self.clients = start_servers(self.cfg, self.models, avail)
        import httpx

        self.http = self._arun(self._new_http(httpx))
        avail["protocol"] = self.clients["default"].protocol if self.clients else None
        avail["min_tokens"] = self.clients["default"].min_tokens if self.clients else False

    def _start_llama_servers(self) -> None:
        found = start_llama_servers(self.cfg, self.models, self.threads, self.results)
        for name, (srv, client) in found.items():
            self.servers[name], self.clients[name] = srv, client
        self.llama_arms = list(found)

    @staticmethod
    async def _new_http(httpx: Any) -> Any:
        return httpx.AsyncClient(timeout=600)

    def close(self) -> None:
        if self.http is not None:
            self._arun(self.http.aclose())
        for srv in self.servers.values():
            srv.stop()
        for peer in self.peer_procs:
            peer.close()

    # ---- helpers -------------------------------------------------------------------------
    def _arun(self, coro: Any) -> Any:
        """Run on one long-lived loop, so single-stream requests reuse one keep-alive connection."""
        return self.loop.run_until_complete(coro)

    def _server_once(self, name: str, stream: bool, protocol: str | None = None) -> dict[str, Any]:
        client = self.clients[name]
        if protocol is not None and protocol != client.protocol:
            client = make_client(client.url, protocol=protocol)
        messages, ids = self._fresh_prompt()
        spec = RequestSpec(messages, self.cfg.new_tokens, prompt_ids=ids)
        res = self._arun(client.request(self.http, spec, stream=stream))
        if not res.ok:
            raise RuntimeError(f"server {name}: {res.error}")
        n = res.output_tokens
        server = res.server or {}
        if not stream and client.protocol != "native":
            res.ttft = float("nan")  # not observable without streaming, nor reported
        return {
            "ttft": res.ttft,
            # a non-streaming client sees no first token: decode speed is the server's own
            "decode_tps": (n - 1) / (res.e2e - res.ttft)
            if stream and n > 1 and res.e2e > res.ttft
            else float(server.get("tokens_per_second", float("nan"))),
            "e2e": res.e2e,
            "output_tokens": n,
            "prompt_tokens": res.prompt_tokens,
            "server_ttft": float(server.get("ttft", float("nan"))),
            "server_decode_tps": float(server.get("tokens_per_second", float("nan"))),
        }

    def _fresh_prompt(self) -> tuple[list[dict[str, str]], list[int]]:
        """A new prompt of exactly ``prompt_tokens`` tokens: unique content per call, so the
        server's prefix reuse cannot skip the prefill that the raw loop has to do."""
        self._prompt_seed += 1
        return self.prompts.exact(self.cfg.prompt_tokens, self._prompt_seed)

    def _raw_once(self, engine: Any) -> dict[str, Any]:
        result: dict[str, Any] = engine.run(self._fresh_prompt()[1], self.cfg.new_tokens).as_dict()
        return result

    def _rounds(
        self, arms: dict[str, Callable[[], dict[str, Any]]], reps: int, desc: str
    ) -> dict[str, Any]:
        """Warm each arm once, then ``reps`` rounds, each running every arm in a new order."""
        samples: dict[str, list[dict[str, Any]]] = {k: [] for k in arms}
        errors: dict[str, str] = {}
        for name, fn in arms.items():  # warm-up, not recorded
            try:
                fn()
            except Exception as exc:
                errors[name] = f"{type(exc).__name__}: {exc}"[:300]
        live = [k for k in arms if k not in errors]
        total = reps * len(live)
        bar = tqdm(total=total, desc=desc, leave=False) if tqdm else None
        for _ in range(reps):
            order = list(live)
            self.rng.shuffle(order)
            for name in order:
                # let spinning thread pools (ORT, OpenMP) of the previous arm go idle first
                time.sleep(0.25)
                try:
                    samples[name].append(arms[name]())
                except Exception as exc:
                    errors[name] = f"{type(exc).__name__}: {exc}"[:300]
                if bar is not None:
                    bar.update(1)
        if bar is not None:
            bar.close()
        out: dict[str, Any] = {}
        for name, rows in samples.items():
            if not rows:
                out[name] = {"error": errors.get(name, "no samples")}
                continue
            keys = [k for k in rows[0] if isinstance(rows[0][k], (int, float))]
            out[name] = {k: _stats([float(r[k]) for r in rows]) for k in keys}
            if name in errors:
                out[name]["error"] = errors[name]
        return out

    # ---- sections ------------------------------------------------------------------------
    def single_stream(self) -> None:
        cfg = self.cfg
        arms: dict[str, Callable[[], dict[str, Any]]] = {
            f"raw (threads={self.threads})": lambda: self._raw_once(self.raw),
        }
        if "default" in self.clients:
            arms["server stream"] = lambda: self._server_once("default", True)
            arms["server non-stream"] = lambda: self._server_once("default", False)
            if self.clients["default"].protocol == "openai":
                arms["server stream (native API)"] = lambda: self._server_once(
                    "default", True, "native"
                )
        for strategy in cfg.strategies:
            name = f"scheduler={strategy}"
            if name in self.clients:
                arms[f"server stream {name}"] = lambda k=name: self._server_once(k, True)
        for name in (SPEC_OFF, SPEC_ON, *cfg.variants):
            if name in self.clients:
                arms[f"server stream {name}"] = lambda k=name: self._server_once(k, True)
        for name in self.llama_arms:
            arms[name] = lambda k=name: self._server_once(k, True)
        if cfg.settings_sweep:
            self._add_setting_arms(arms)
        if cfg.peers and cfg.inprocess_peers:
            self._add_peer_arms(arms)
        log(f"single stream: {len(arms)} arms x {cfg.reps} rounds")
        self.results["single_stream"] = self._rounds(arms, cfg.reps, "single stream")

    def _add_setting_arms(self, arms: dict[str, Callable[[], dict[str, Any]]]) -> None:
        variants = {
            "raw threads=1": RawEngine(self.models["int4"], threads=1),
            "raw spinning=0": RawEngine(self.models["int4"], spinning=False),
            "raw spinning=1": RawEngine(self.models["int4"], spinning=True),
        }
        # builds a shape's BuildPlan leaves out (the 1B shape has no fp32) have no arm
        for name, key in (("raw int4 acc-level default", "int4-acc0"), ("raw fp32", "fp32")):
            if key in self.models:
                variants[name] = RawEngine(self.models[key])
        for name, eng in variants.items():
            arms[name] = lambda e=eng: self._raw_once(e)
        for name in ("threads=1", "spinning=0", "acc-level-default"):
            if name in self.clients:
                arms[f"server stream {name}"] = lambda k=name: self._server_once(k, True)

    def _add_peer_arms(self, arms: dict[str, Callable[[], dict[str, Any]]]) -> None:
        from bench.peers import libraries as peers
        from bench.peers.worker import PeerProcess

        n = self.cfg.new_tokens
        avail = self.results["availability"]
        self.results.setdefault("versions_peers", {})
        try:
            hf = PeerProcess("transformers", self.models["hf"], self.threads)
            self.peer_procs.append(hf)
            arms["transformers fp32"] = lambda: hf.run(self._fresh_prompt()[1], n).as_dict()
            self.results["versions_peers"]["transformers"] = hf.version
            avail["transformers"] = "ok"
        except Exception as exc:
            avail["transformers"] = f"not available: {type(exc).__name__}: {exc}"[:300]
        why = peers.ensure_llama_cpp(log)
        if why is None:
            try:
                gguf = peers.ensure_gguf(self.models["hf"], log, threads=self.threads)
                lc = PeerProcess("llama.cpp", gguf, self.threads)
                self.peer_procs.append(lc)
                arms["llama.cpp Q4_0"] = lambda: lc.run(self._fresh_prompt()[1], n).as_dict()
                self.results["versions_peers"]["llama.cpp"] = lc.version
                avail["llama.cpp"] = "ok"
            except Exception as exc:
                avail["llama.cpp"] = f"not available: {type(exc).__name__}: {exc}"[:300]
        else:
            avail["llama.cpp"] = f"not available: {why}"
        log(f"peers: transformers {avail['transformers']}; llama.cpp {avail['llama.cpp']}")

    def load(self) -> None:
        """Fixed in-flight concurrency and Poisson arrivals, per scheduler strategy, and for
        llama-server."""
        cfg = self.cfg
        names = [f"scheduler={s}" for s in cfg.strategies if f"scheduler={s}" in self.clients]
        if not names and "default" in self.clients:
            names = ["default"]
        names += [n for n in (SPEC_OFF, SPEC_ON, *cfg.variants) if n in self.clients]
        names += self.llama_arms
        slo = SLO(cfg.slo_ttft, cfg.slo_tpot)
        out: dict[str, Any] = {n: {"concurrency": [], "poisson": []} for n in names}
        counter = iter(range(1_000_000))

        def specs(k: int) -> list[RequestSpec]:
            out = []
            for _ in range(k):
                msgs, ids = self.prompts.chat(cfg.prompt_tokens, 20_000 + next(counter))
                out.append(RequestSpec(msgs, cfg.new_tokens, prompt_ids=ids))
            return out

        plan = [("concurrency", c) for c in cfg.concurrency] + [("poisson", r) for r in cfg.rates]
        log(f"load: {len(plan)} levels x {len(names)} strategies")
        for kind, level in plan:
            order = list(names)
            self.rng.shuffle(order)
            for name in order:
                k = max(cfg.load_requests, 2 * int(level)) if kind == "concurrency" else None
                batch = specs(k or cfg.load_requests)
                srv = self.servers[name]
                cpu0 = cpu_seconds(srv.proc.pid) if srv.proc else float("nan")
                summary = asyncio.run(
                    run_load(
                        self.clients[name],
                        batch,
                        concurrency=int(level) if kind == "concurrency" else None,
                        rate=float(level) if kind == "poisson" else None,
                        seed=cfg.seed,
                        slo=slo,
                        desc=f"{name} {kind}={level}",
                    )
                )
                if srv.proc:
                    summary["server_cpu_s"] = cpu_seconds(srv.proc.pid) - cpu0
                out[name][kind].append(summary)
        self.results["load"] = out

    def chat(self) -> None:
        """TTFT of the next chat turn with and without prefix reuse, per history length."""
        cfg = self.cfg
        out: dict[str, Any] = {}
        servers = [n for n in ("default", "no-reuse") if n in self.clients]
        for strategy in cfg.chat_strategies:
            for name in (f"scheduler={strategy}", f"scheduler={strategy} no-reuse"):
                if name in self.clients:
                    servers.append(name)
        for hist in cfg.histories:
            rows: dict[str, list[float]] = {"raw reuse": [], "raw full prefill": []}
            chunks = [c for c in (128, 256) if c < hist]
            rows.update({f"raw full prefill, chunks of {c}": [] for c in chunks})
            rows.update({f"server {n}": [] for n in servers})
            rows.update({f"server {n} turn 1": [] for n in servers})
            for rep in range(cfg.chat_reps):
                msgs, ids = self.prompts.chat(hist, seed=30_000 + 100 * hist + rep)
                next_msgs, next_ids = self.prompts.chat(
                    cfg.turn_tokens, seed=40_000 + rep, history=[]
                )
                reuse, full = self.raw.turn_ttft(ids, cfg.reply_tokens, next_ids)
                rows["raw reuse"].append(reuse)
                rows["raw full prefill"].append(full)
                for c in chunks:
                    full_ids = ids + next_ids
                    rows[f"raw full prefill, chunks of {c}"].append(self.raw.prefill(full_ids, c))
                order = list(servers)
                self.rng.shuffle(order)
                for name in order:
                    t1, t2 = self._conversation(name, msgs, next_msgs[-1]["content"])
                    rows[f"server {name} turn 1"].append(t1)
                    rows[f"server {name}"].append(t2)
            out[str(hist)] = {k: _stats(v) for k, v in rows.items()}
        self.results["chat"] = out

    def _conversation(self, name: str, msgs: list[dict[str, str]], nxt: str) -> tuple[float, float]:
        client = self.clients[name]
        if client.protocol != "native":
            # the native API returns the reply text
            client = make_client(client.url, protocol="native")
        import httpx

        async def go() -> tuple[float, float]:
            async with httpx.AsyncClient(timeout=600) as http:
                r = await http.post(
                    client.url + "/v1/chat",
                    json={"messages": msgs, "max_tokens": self.cfg.reply_tokens, "temperature": 0},
                )
                r.raise_for_status()
                first = r.json()
                turn2 = msgs + [
                    {"role": "assistant", "content": first["content"]},
                    {"role": "user", "content": nxt},
                ]
                res = await client.request(
                    http, RequestSpec(turn2, self.cfg.reply_tokens), stream=True
                )
                if not res.ok:
                    raise RuntimeError(res.error)
                return float(first["metrics"]["ttft"]), res.ttft

        return asyncio.run(go())

    # ---- the whole run -------------------------------------------------------------------
    def run(self) -> dict[str, Any]:
        t0 = time.perf_counter()
        self.results["meta"] = machine.describe()
        self.results["config"] = {k: str(v) for k, v in asdict(self.cfg).items() if k != "out"}
        self.setup()
        try:
            self.single_stream()
            self.load()
            self.chat()
        finally:
            self.close()
        self.results["meta"]["duration_s"] = time.perf_counter() - t0
        self.results["ratios"] = ratios(self.results)
        return self.results


def run(cfg: RunConfig) -> Path:
    bench = Bench(cfg)
    results = bench.run()
    cfg.out.mkdir(parents=True, exist_ok=True)
    path = cfg.out / "results.json"
    path.write_text(json.dumps(results, indent=2, default=str))
    (cfg.out / "results.md").write_text(report.markdown(results))
    plots = report.plots(results, cfg.out)
    log(f"wrote {path}, results.md and {len(plots)} plots in {cfg.out}")
    return path
