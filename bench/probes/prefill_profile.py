"""``python -m bench prefill --profile FOLDER``: where a prefill's time goes, per operator
(and ``python -m bench steps --profile``: a decode step of several rows, the same way).

onnxruntime's own profiler on a bare session of the decoder graph (the session options the
server gives it), the whole prompt (the first ``--lengths``) in one run into an empty KV cache;
warm-up runs first, then the medians over ``runs`` profiled runs; with several folders (build
variants), their runs alternate. Operators are grouped by kind; the int4 matmuls are
split by role (attention projections, MLP, the logits head), since only the last position's
logits are needed and the head is the single largest matmul. "outside kernels" is each run's
time not spent in any kernel (the executor between operators: allocation, scheduling), and
"2nd thread" the share of a group's kernel time spent in kernels that handed work to another
thread of the intra-op pool (onnxruntime's ``thread_scheduling_stats``).
"""

from __future__ import annotations

import json
import statistics
import tempfile
from collections import defaultdict
from pathlib import Path
from typing import Any


def group(op: str, node: str) -> str:
    """The row an operator counts in."""
    if op == "MatMulNBits":
        if "lm_head" in node:
            return "MatMulNBits: logits head"
        if "/attn/" in node:
            return "MatMulNBits: attention q/k/v/o"
        return "MatMulNBits: MLP"
    if op == "GroupQueryAttention":
        return "GroupQueryAttention (rotary inside)"
    if op in ("SimplifiedLayerNormalization", "SkipSimplifiedLayerNormalization"):
        return "RMS norms (+ residual add)"
    if op in ("RotaryEmbedding",):
        return "rotary"
    if op in ("QuickGelu", "Sigmoid", "Mul", "Silu"):
        return "MLP activation (SiLU × up)"
    if op in ("GatherBlockQuantized", "Gather") and "embed" in node:
        return "embedding lookup"
    return "other (mask, shapes, casts)"


def _threaded(kernels: list[dict[str, Any]]) -> set[int]:
    """Indices of the kernels in which another pool thread ran a task: its ``num_run`` (a
    running count) went up since the kernel before."""
    seen: dict[str, int] = {}
    found = set()
    for i, event in enumerate(kernels):
        stats = event.get("args", {}).get("thread_scheduling_stats")
        threads = stats.get("sub_threads") if isinstance(stats, dict) else None
        for thread, counts in (threads if isinstance(threads, dict) else {}).items():
            runs = int(counts.get("num_run", 0)) if isinstance(counts, dict) else 0
            if runs > seen.get(thread, runs):
                found.add(i)
            seen[thread] = runs
    return found


def summarize(events: list[dict[str, Any]], skip: int) -> dict[str, Any]:
    """Per-group kernel milliseconds (median over the model runs after the first ``skip``)."""
    runs = sorted(
        (e for e in events if e.get("cat") == "Session" and e["name"] == "model_run"),
        key=lambda e: e["ts"],
    )[skip:]
    kernels = sorted(
        (e for e in events if e.get("cat") == "Node" and e["name"].endswith("_kernel_time")),
        key=lambda e: e["ts"],
    )
    parallel = _threaded(kernels)
    per_run: list[dict[str, float]] = []
    threaded: dict[str, float] = defaultdict(float)
    counts: dict[str, int] = defaultdict(int)
    for run in runs:
        lo, hi = run["ts"], run["ts"] + run["dur"]
        ms: dict[str, float] = defaultdict(float)
        for i, e in enumerate(kernels):
            if lo <= e["ts"] <= hi:
                name = group(e["args"]["op_name"], e["name"])
                ms[name] += e["dur"] / 1e3
                if run is runs[-1]:
                    counts[name] += 1
                    threaded[name] += e["dur"] / 1e3 if i in parallel else 0.0
        ms["outside kernels"] = run["dur"] / 1e3 - sum(ms.values())
        ms["total (model_run)"] = run["dur"] / 1e3
        per_run.append(ms)
    names = sorted({k for ms in per_run for k in ms})
    last = per_run[-1]
    return {
        "ms": {k: statistics.median(ms.get(k, 0.0) for ms in per_run) for k in names},
        "nodes": dict(counts),
        "threaded_share": {k: threaded[k] / last[k] for k in counts if last.get(k)},
        "runs": len(per_run),
    }


def _session(
    folder: Path, length: int, threads: int, tmp: str, slots: int = 1, profiled: bool = True
) -> tuple[Any, Any, Any]:
    import onnxruntime as ort

    from backends.engine.batch.decoder import Decoder, read_spec, session_options
    from backends.engine.batch.kv_cache import KVCache
    from backends.models.folder import inspect_model_folder

    model = inspect_model_folder(folder)
    options = session_options(ort, model, threads)
    if profiled:
        options.enable_profiling = True
        options.profile_file_prefix = str(Path(tmp) / model.path.name)
    path = str(model.path / model.config["model"]["decoder"]["filename"])
    session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
    spec = read_spec(model, {i.name: i.type for i in session.get_inputs()})
    kv = KVCache(spec, slots, model.kv_capacity(length), ort)
    return session, Decoder(spec, session, ort), kv


def profile(
    folders: list[Path], length: int, threads: int, runs: int = 3, warm: int = 2
) -> list[dict[str, Any]]:
    """One profile per folder; their runs alternate, so drift on a busy machine hits all."""
    import numpy as np

    ids = np.random.default_rng(0).integers(0, 1000, (1, length), dtype=np.int64)
    mask, positions = np.ones_like(ids), np.arange(length, dtype=np.int64)[None]
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        arms = [_session(folder, length + 8, threads, tmp) for folder in folders]
        for _ in range(warm + runs):
            for _, decoder, kv in arms:
                decoder.run(ids, mask, positions, kv, (0, 1))
        for folder, (session, _, _) in zip(folders, arms, strict=True):
            events = json.loads(Path(session.end_profiling()).read_text())
            result = summarize(events, skip=warm)
            result.update(model=folder.name, length=length, threads=threads)
            results.append(result)
    return results


def decode_profile(
    folder: Path, rows: int, threads: int, history: int = 200, runs: int = 10, warm: int = 3
) -> dict[str, Any]:
    """The same profile for one decode step of ``rows`` rows, each holding ``history`` tokens
    (``python -m bench steps --profile``): row 0 is prefilled and copied into the others (a
    prefill of each would take minutes at 1B on a busy machine; the step's cost does not
    depend on the values), then ``warm`` and ``runs`` steps feed one token to each row."""
    import numpy as np

    with tempfile.TemporaryDirectory() as tmp:
        session, decoder, kv = _session(folder, history + warm + runs + 8, threads, tmp, rows)
        ones = np.ones((1, history), dtype=np.int64)
        decoder.run(ones, ones, np.arange(history)[None], kv, (0, 1))
        for row in range(1, rows):
            kv.copy(0, row, 0, history)
        for i in range(warm + runs):
            past = history + i
            decoder.run(
                np.ones((rows, 1), dtype=np.int64),
                np.ones((rows, past + 1), dtype=np.int64),
                np.full((rows, 1), past, dtype=np.int64),
                kv,
                (0, rows),
            )
        events = json.loads(Path(session.end_profiling()).read_text())
    result = summarize(events, skip=1 + warm)
    result.update(model=folder.name, rows=rows, history=history, threads=threads)
    return result


def table(results: list[dict[str, Any]], labels: list[str]) -> str:
    """One column per profile (e.g. before / after), rows by milliseconds in the first."""
    first = results[0]["ms"]
    rows = sorted({k for r in results for k in r["ms"]}, key=lambda k: -first.get(k, 0.0))
    rows.remove("total (model_run)")
    rows.append("total (model_run)")
    head = ["operator", *(f"{label}: ms (share, 2nd thread)" for label in labels)]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for name in rows:
        cells = [name]
        for r in results:
            ms, total = r["ms"].get(name), r["ms"]["total (model_run)"]
            if ms is None:
                cells.append("–")
                continue
            share = r["threaded_share"].get(name)
            more = f", {share:.0%}" if share is not None else ""
            cells.append(f"{ms:.1f} ({ms / total:.0%}{more})")
        lines.append("| " + " | ".join(cells) + " |")
    r = results[0]
    what = (
        f"{r['length']}-token prefill"
        if "length" in r
        else f"decode step of {r['rows']} rows ({r['history']} tokens of history each)"
    )
    lines.append(
        f"\n{what}, {r['threads']} intra-op threads, median of {r['runs']} "
        "profiled runs after warm-up; onnxruntime's profiler (its own overhead included)."
    )
    return "\n".join(lines) + "\n"
