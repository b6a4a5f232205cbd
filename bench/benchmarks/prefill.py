"""``python -m bench prefill``: prompt tokens/s at 128, 512 and 2,048 tokens, side by side.

Arms, all on the same weights and the same thread count, run in rounds in which every arm
reads one fresh prompt of each length, in a new random order (so drift on a shared machine
spreads over all of them):

- ``server``: this server (``main_genai.py``, its defaults, a KV budget that holds the longest
  prompt), ``/v1/chat/completions`` streaming one token: the client's TTFT over HTTP;
- ``onnxruntime session``: a bare ``onnxruntime.InferenceSession`` on the same graph, with
  the session options the server gives it (:mod:`backends.engine.batch.decoder`), the whole
  prompt in one run into an empty KV cache: the graph's own prefill time;
- ``llama-server``: llama.cpp's C++ server on a GGUF of the same weights (``--llama-quant``,
  Q4_0 unless told), one slot,
  its defaults, the prompt as token ids: the client's TTFT over HTTP, and its own ``timings``;
- ``llama-bench``: ``llama-bench -p N -n 0 -r 1`` on the same GGUF, where it was built.

The table gives prompt tokens/s (median, and the rounds' range) with the ratios ours ÷
llama.cpp's, the CPU's flags (AVX2, AVX-512, VNNI, AMX) and the load average before and after.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import statistics
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.harness import machine
from bench.harness.clients import RequestSpec, make_client
from bench.harness.model_cache import ensure_models
from bench.harness.paths import DEMO, ROOT
from bench.harness.prompts import PromptMaker
from bench.harness.server import ServerProcess, cpu_seconds
from bench.peers.raw import usable_cpus

SERVER = "server"
SESSION = "onnxruntime session"
LLAMA_SERVER = "llama-server"
LLAMA_TIMINGS = "llama-server own timings"
LLAMA_BENCH = "llama-bench"
# Ours against theirs: (numerator, denominator) arms of the ratio columns.
CPU = " (CPU time)"
RATIOS = (
    (SERVER, LLAMA_SERVER),
    (SESSION, LLAMA_BENCH),
    (SESSION, LLAMA_TIMINGS),
    (SERVER + CPU, LLAMA_SERVER + CPU),
    (SESSION + CPU, LLAMA_SERVER + CPU),
)


@dataclass
class PrefillConfig:
    lengths: list[int] = field(default_factory=lambda: [128, 512, 2048])
    rounds: int = 3
    shape: str = "smollm2-135m"
    model: Path | None = None  # another folder of the same weights (a build variant)
    threads: int = 0  # 0: every CPU this process may use
    llama: bool = True
    llama_quant: str = "Q4_0"  # llama-server's and llama-bench's GGUF type
    server_env: dict[str, str] = field(default_factory=dict)
    # more bare-session arms: name -> (folder, session options / chunk), see parse_session
    sessions: dict[str, tuple[Path, dict[str, str]]] = field(default_factory=dict)
    server: bool = True
    cpu_time: bool = False  # also the session arms' CPU seconds (steadier on a busy machine)
    # an unrecorded first round of every length; off, list a short length first instead (an
    # 8k-token prompt at 1B takes minutes an arm on 2 cores)
    warm_up: bool = True
    smoke: bool = False
    out: Path | None = None

    @classmethod
    def smoke_config(cls) -> PrefillConfig:
        return cls(lengths=[32, 64], rounds=1, shape="demo", llama=False, smoke=True)


def cpu_flags_line(meta: dict[str, Any]) -> str:
    """``AVX2 yes · AVX-512 yes · VNNI yes (avx512_vnni) · AMX no`` from machine.describe()."""
    flags = set(meta.get("cpu_flags", []))
    vnni = sorted(flags & {"avx512_vnni", "avx_vnni"})
    amx = sorted(flags & {"amx_int8", "amx_tile", "amx_bf16"})

    def yes(on: bool, which: list[str] | None = None) -> str:
        return ("yes" + (f" ({', '.join(which)})" if which else "")) if on else "no"

    return (
        f"{meta.get('cpu_model', 'unknown CPU')}, {meta.get('usable_cpus')} usable CPUs: "
        f"AVX2 {yes('avx2' in flags)} · AVX-512 {yes('avx512f' in flags)} · "
        f"VNNI {yes(bool(vnni), vnni)} · AMX {yes(bool(amx), amx)}"
    )


class SessionArm:
    """The decoder graph in a bare InferenceSession, one KV row bound in place. ``options``:
    session options over the folder's (``intra_op_num_threads``, ``session.*`` entries), and
    ``chunk``: feed the prompt in runs of at most that many tokens (0: one run)."""

    def __init__(
        self, folder: Path, threads: int, capacity: int, options: dict[str, str] | None = None
    ) -> None:
        import numpy as np
        import onnxruntime as ort

        from backends.engine.batch.decoder import Decoder, read_spec, session_options
        from backends.engine.batch.kv_cache import KVCache
        from backends.models.folder import inspect_model_folder

        options = dict(options or {})
        self.chunk = int(options.pop("chunk", 0))
        model = inspect_model_folder(folder)
        path = str(model.path / model.config["model"]["decoder"]["filename"])
        so = session_options(ort, model, int(options.pop("intra_op_num_threads", threads)))
        for key, value in options.items():
            so.add_session_config_entry(key, value)
        session = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
        spec = read_spec(model, {i.name: i.type for i in session.get_inputs()})
        self.np, self.decoder = np, Decoder(spec, session, ort)
        self.kv = KVCache(spec, 1, model.kv_capacity(capacity), ort)

    def run(self, ids: list[int]) -> tuple[float, float]:
        """Wall seconds and this process's CPU seconds for the prompt."""
        np, n = self.np, len(ids)
        step = self.chunk or n
        cpu, started = time.process_time(), time.perf_counter()
        for past in range(0, n, step):
            end = min(n, past + step)
            logits = self.decoder.run(
                np.asarray([ids[past:end]], dtype=np.int64),
                np.ones((1, end), dtype=np.int64),
                np.arange(past, end, dtype=np.int64)[None, :],
                self.kv,
                (0, 1),
            )
        int(np.argmax(logits[0, -1]))  # the first token, as every other arm chooses it
        return time.perf_counter() - started, time.process_time() - cpu


def parse_session(text: str) -> tuple[str, Path, dict[str, str]]:
    """``NAME=FOLDER[,KEY=VALUE...]`` (``--session``): a bare-session arm on another folder
    of the same weights, with session options or ``chunk=N``."""
    name, _, rest = text.partition("=")
    folder, *pairs = rest.split(",")
    if not name or not folder:
        raise ValueError(f"--session wants NAME=FOLDER[,KEY=VALUE...], not {text!r}")
    return name, Path(folder), dict(pair.split("=", 1) for pair in pairs)


def _llama_bench(binary: Path, gguf: Path, threads: int, n: int) -> float:
    """Seconds llama-bench reports for one ``n``-token prompt (after its own warm-up run)."""
    r = subprocess.run(
        [str(binary), "-m", str(gguf), "-p", str(n), "-n", "0", "-r", "1"]
        + ["-t", str(threads), "-o", "json"],
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )
    if r.returncode != 0:
        raise RuntimeError(f"llama-bench exited with {r.returncode}: {r.stderr.strip()[-300:]}")
    [row] = json.loads(r.stdout)
    return float(row["avg_ns"]) / 1e9


class Prefill:
    def __init__(self, cfg: PrefillConfig) -> None:
        self.cfg = cfg
        self.threads = cfg.threads or usable_cpus()
        self.rng = random.Random(0)
        self.seed = 70_000
        self.loop = asyncio.new_event_loop()
        self.arms: dict[str, Callable[[list[dict[str, str]], list[int]], dict[str, float]]] = {}
        self.availability: dict[str, str] = {}
        self.versions: dict[str, Any] = {}
        self.procs: list[Any] = []
        self.http: Any = None

    # ---- setup ---------------------------------------------------------------------------
    def setup(self) -> None:
        import onnxruntime_genai as og

        cfg = self.cfg
        models = {"int4": DEMO} if cfg.smoke else ensure_models(cfg.shape)
        self.folder = cfg.model or models["int4"]
        self.prompts = PromptMaker(og.Tokenizer(og.Model(str(self.folder))))
        longest = max(cfg.lengths) + 8
        self.http = self.loop.run_until_complete(self._client())
        sessions = {SESSION: SessionArm(self.folder, self.threads, longest)}
        for name, (folder, options) in cfg.sessions.items():
            sessions[name] = SessionArm(folder, self.threads, longest, options)
        for name, arm in sessions.items():
            self.arms[name] = lambda _m, ids, arm=arm, name=name: self._session(name, arm, ids)
            self.availability[name] = "ok"
        if cfg.server:
            self._start_server(longest)
        if cfg.llama:
            self._start_llama(models["hf"], longest)
        else:
            self.availability[LLAMA_SERVER] = "not available: not requested"

    @staticmethod
    def _cpu(server: ServerProcess) -> float:
        return cpu_seconds(server.proc.pid) if server.proc is not None else float("nan")

    def _cpu_used(self, name: str, server: ServerProcess, before: float) -> dict[str, float]:
        """The server process's CPU seconds since ``before`` (all its threads: the HTTP
        handling too), with ``cpu_time``."""
        if not self.cfg.cpu_time:
            return {}
        # /proc counts in clock ticks: wait for the tick that ends the request to land
        time.sleep(0.02)
        return {name + CPU: self._cpu(server) - before}

    def _session(self, name: str, arm: SessionArm, ids: list[int]) -> dict[str, float]:
        wall, cpu = arm.run(ids)
        return {name: wall, name + CPU: cpu} if self.cfg.cpu_time else {name: wall}

    @staticmethod
    async def _client() -> Any:
        import httpx

        return httpx.AsyncClient(timeout=600)

    def _start_server(self, longest: int) -> None:
        # The default KV budget (1 GiB over 8 rows) may not hold the longest prompt.
        env = {
            "GENAI_MODEL_DIR": str(self.folder),
            "GENAI_INTRA_OP_THREADS": str(self.threads),
            "GENAI_KV_CACHE_MIB": "4096",
            **self.cfg.server_env,
        }
        server = ServerProcess(SERVER, env)
        server.start()
        self.procs.append(server)
        if not server.wait_ready():
            raise RuntimeError(f"the server did not start: {server.error}")
        client = make_client(server.url, protocol="openai")
        self.loop.run_until_complete(client.probe(self.http))
        self.availability[SERVER] = "ok"

        def ask(messages: list[dict[str, str]], ids: list[int]) -> dict[str, float]:
            spec = RequestSpec(messages, 1, prompt_ids=ids)
            used = self._cpu(server)
            res = self.loop.run_until_complete(client.request(self.http, spec, stream=True))
            if not res.ok or res.prompt_tokens != len(ids):
                raise RuntimeError(f"server: {res.error or res.prompt_tokens}")
            return {SERVER: res.ttft, **self._cpu_used(SERVER, server, used)}

        self.arms[SERVER] = ask

    def _start_llama(self, hf: Path, longest: int) -> None:
        from bench.peers import libraries as peers
        from bench.peers import llama_server

        bins, why = llama_server.ensure_binaries()
        if bins is None:
            self.availability[LLAMA_SERVER] = f"not available: {why}"[:400]
            return
        self.versions[LLAMA_SERVER] = {**bins.info, "gguf": self.cfg.llama_quant}
        gguf = peers.ensure_gguf(
            hf, quantize=bins.quantize, threads=self.threads, quant=self.cfg.llama_quant
        )
        server = llama_server.LlamaServer(
            LLAMA_SERVER, {}, binary=bins.server, gguf=gguf, threads=self.threads,
            parallel=1, ctx_per_slot=longest + 64,
        )  # fmt: skip
        server.start()
        self.procs.append(server)
        if not server.wait_ready():
            self.availability[LLAMA_SERVER] = f"not available: {server.error}"[:400]
            return
        extra = dict(llama_server.REQUEST_EXTRA, cache_prompt=False)
        client = make_client(server.url, protocol="completions", model="bench", extra=extra)
        self.availability[LLAMA_SERVER] = "ok"

        def ask(messages: list[dict[str, str]], ids: list[int]) -> dict[str, float]:
            spec = RequestSpec(messages, 1, prompt_ids=ids)
            used = self._cpu(server)
            res = self.loop.run_until_complete(client.request(self.http, spec, stream=True))
            timings = (res.server or {}).get("timings", {})
            if not res.ok or timings.get("prompt_n") != len(ids):
                raise RuntimeError(f"llama-server: {res.error or timings}")
            return {
                LLAMA_SERVER: res.ttft,
                LLAMA_TIMINGS: float(timings["prompt_ms"]) / 1e3,
                **self._cpu_used(LLAMA_SERVER, server, used),
            }

        self.arms[LLAMA_SERVER] = ask
        bench = bins.server.parent / "llama-bench"
        if bench.exists():
            self.arms[LLAMA_BENCH] = lambda _m, ids: {
                LLAMA_BENCH: _llama_bench(bench, gguf, self.threads, len(ids))
            }
            self.availability[LLAMA_BENCH] = "ok"
        else:
            self.availability[LLAMA_BENCH] = "not available: llama-bench was not built"

    def close(self) -> None:
        if self.http is not None:
            self.loop.run_until_complete(self.http.aclose())
        self.loop.run_until_complete(self.loop.shutdown_asyncgens())
        self.loop.close()
        for proc in self.procs:
            proc.stop()

    # ---- the run -------------------------------------------------------------------------
    def measure(self) -> dict[str, dict[int, list[float]]]:
        """Seconds per prompt: arm -> length -> one figure per round."""
        samples: dict[str, dict[int, list[float]]] = {}
        warm_up = (True,) if self.cfg.warm_up else ()
        for warm in (*warm_up, *([False] * self.cfg.rounds)):
            for n in self.cfg.lengths:
                order = list(self.arms)
                self.rng.shuffle(order)
                for name in order:
                    self.seed += 1
                    messages, ids = self.prompts.exact(n, self.seed)  # fresh for every arm
                    time.sleep(0.25)  # the previous arm's spinning threads go idle first
                    for arm, seconds in self.arms[name](messages, ids).items():
                        if not warm:
                            samples.setdefault(arm, {}).setdefault(n, []).append(seconds)
        return samples

    def run(self) -> dict[str, Any]:
        meta = machine.describe()
        meta["load_before"] = os.getloadavg()
        self.setup()
        try:
            samples = self.measure()
        finally:
            self.close()
        meta["load_after"] = os.getloadavg()
        return {
            "meta": meta,
            "config": {
                "lengths": self.cfg.lengths,
                "rounds": self.cfg.rounds,
                "warm_up": self.cfg.warm_up,
                "threads": self.threads,
                "model": self.folder.name,
                "shape": self.cfg.shape,
                "llama_quant": self.cfg.llama_quant,
                "server_env": self.cfg.server_env,
                "sessions": {k: [str(f), o] for k, (f, o) in self.cfg.sessions.items()},
            },
            "availability": self.availability,
            "versions_peers": self.versions,
            "seconds": {arm: {str(n): v for n, v in by.items()} for arm, by in samples.items()},
        }


def _tps(seconds: list[float], n: int) -> list[float]:
    return sorted(n / s for s in seconds)


def table(results: dict[str, Any]) -> str:
    """Markdown: prompt tokens/s per arm and length (median, range), the ratios, the flags."""
    seconds = results["seconds"]
    known = (SERVER, SESSION, LLAMA_SERVER, LLAMA_TIMINGS, LLAMA_BENCH)
    order = [*known[:2], *results["config"]["sessions"], *known[2:]]
    arms = [x for a in order for x in (a, a + CPU) if x in seconds]
    ratios = [(a, b) for a, b in RATIOS if a in seconds and b in seconds]
    head = ["prompt tokens", *arms, *(f"{a} ÷ {b}" for a, b in ratios)]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for n in results["config"]["lengths"]:
        row = [f"{n:,}"]
        for arm in arms:
            tps = _tps(seconds[arm].get(str(n), []), n)
            row.append(
                f"{statistics.median(tps):,.0f} ({tps[0]:,.0f}–{tps[-1]:,.0f})" if tps else "–"
            )
        for a, b in ratios:
            ours, theirs = (seconds[x].get(str(n), []) for x in (a, b))
            row.append(f"{statistics.median(theirs) / statistics.median(ours):.2f}")
        lines.append("| " + " | ".join(row) + " |")
    meta = results["meta"]
    load = ", ".join(f"{x:.1f}" for x in meta["load_before"][:1] + meta["load_after"][:1])
    lines += [
        "",
        f"Prompt tokens/s, median (range) over {results['config']['rounds']} rounds"
        + ("" if results["config"].get("warm_up", True) else " (no warm-up round)")
        + "; "
        f"{results['config']['threads']} threads every arm; model {results['config']['model']}"
        + (f" of {shape}" if (shape := results["config"].get("shape")) else "")
        + (f"; llama.cpp on {q}" if (q := results["config"].get("llama_quant")) else "")
        + ".",
        f"CPU: {cpu_flags_line(meta)}.",
        f"Load average (1 min) before, after: {load}. {meta['date_utc']}, "
        f"onnxruntime {meta['versions'].get('onnxruntime')}, source {meta['source']['commit']}"
        + (" (dirty)" if meta["source"]["dirty"] else "")
        + ".",
    ]
    missing = {k: v for k, v in results["availability"].items() if v != "ok"}
    if missing:
        lines.append("Not measured: " + "; ".join(f"{k}: {v}" for k, v in missing.items()))
    return "\n".join(lines) + "\n"


def run(cfg: PrefillConfig) -> str:
    results = Prefill(cfg).run()
    text = table(results)
    out = cfg.out or ROOT / "bench" / "results" / f"prefill-{time.strftime('%Y%m%d-%H%M%S')}"
    out.mkdir(parents=True, exist_ok=True)
    (out / "prefill.json").write_text(json.dumps(results, indent=2, default=str))
    (out / "prefill.md").write_text(text)
    return text
