"""Ratios vs targets, the Markdown tables and the PNG plots, all from the results dict."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

TARGETS = {
    "server_decode_over_raw": (">=", 0.97),
    "server_ttft_minus_raw_ms": ("<=", 5.0),
    "reuse_over_no_reuse_ttft_1024": ("<=", 0.15),
}

BATCH, GENERATOR, LLAMA = "scheduler=batch", "scheduler=generator", "llama-server"
LLAMA_ARM = "llama-server Q4_0"

# The continuous-batching scheduler's targets: (key in "ratios", what it is, op, target).
# Each value is computed when both sides were measured, else "n/a: <why>".
BATCH_TARGETS: list[tuple[str, str, str, float]] = [
    (
        "batch_c4_over_c1_throughput",
        "`batch` aggregate end-to-end tokens/s, 4 in flight ÷ 1 in flight",
        ">=",
        1.6,
    ),
    (
        "batch_c8_over_c1_throughput",
        "`batch` aggregate end-to-end tokens/s, 8 in flight ÷ 1 in flight",
        ">=",
        1.8,
    ),
    ("batch_decode_over_raw", "`batch` single-stream decode ÷ raw og loop", ">=", 1.0),
    (
        "server_ttft_minus_raw_ms",
        "server (default) TTFT − raw prefill, single stream, ms",
        "<=",
        5.0,
    ),
    ("batch_ttft_minus_raw_ms", "`batch` TTFT − raw prefill, single stream, ms", "<=", 5.0),
    (
        "batch_c4_over_llama_server_c4",
        "`batch` aggregate tokens/s at 4 in flight ÷ llama-server at 4 in flight",
        ">=",
        1.0,
    ),
    (
        "batch_over_generator_ttft_p50_c4",
        "TTFT p50 at 4 in flight, `batch` ÷ `generator` (not worse: ≤ 1)",
        "<=",
        1.0,
    ),
]
TARGETS.update({key: (op, target) for key, _, op, target in BATCH_TARGETS})


def _med(section: dict[str, Any], arm: str, key: str) -> float:
    try:
        return float(section[arm][key]["median"])
    except (KeyError, TypeError):
        return float("nan")


def _raw_arm(single: dict[str, Any]) -> str:
    return next((k for k in single if k.startswith("raw (threads=")), "raw")


def _div(a: float, b: float) -> float:
    return a / b if b and not math.isnan(b) else float("nan")


def _why(results: dict[str, Any], arm: str, section: str) -> str:
    """Why ``arm`` has no figure in ``section``: its availability entry or its error."""
    avail = results.get("availability", {}).get(arm)
    if isinstance(avail, str) and avail != "ok":
        return f"{arm}: {avail}"
    row = results.get(section, {}).get(arm)
    if isinstance(row, dict) and "error" in row:
        return f"{arm}: {row['error']}"
    return f"{arm}: not measured in this run"


def _load_row(results: dict[str, Any], name: str, level: int) -> dict[str, Any] | str:
    """The load summary of ``name`` at ``level`` in flight, or why there is none."""
    kinds = results.get("load", {}).get(name)
    if kinds is None:
        return _why(results, name, "load")
    row = next((r for r in kinds.get("concurrency", []) if r.get("concurrency") == level), None)
    if row is None:
        return f"{name}: no run at {level} in flight"
    if not row.get("ok"):
        return f"{name}: no request succeeded at {level} in flight: {row.get('errors')}"
    return dict(row)


def _single(results: dict[str, Any], arm: str, key: str, variant: str = "") -> float | str:
    """The median ``key`` of single-stream ``arm``, or why there is none (its error, else
    the availability of server ``variant``)."""
    single = results.get("single_stream", {})
    v = _med(single, arm, key)
    if not math.isnan(v):
        return v
    row = single.get(arm)
    if isinstance(row, dict) and "error" in row:
        return f"{arm}: {row['error']}"
    return _why(results, variant or arm, "single_stream")


def _ms(v: float | str) -> float | str:
    return v * 1e3 if isinstance(v, float) else v


def target_rows(results: dict[str, Any]) -> list[dict[str, Any]]:
    """The targets of ``BATCH_TARGETS``: key, label, value (or "n/a: why"), the figures
    compared, op and target."""
    single = results.get("single_stream", {})
    raw = _raw_arm(single)
    rows: list[dict[str, Any]] = []

    def add(key: str, a: float | str, b: float | str, how: str, unit: str) -> None:
        label, op, target = next((lab, o, t) for k, lab, o, t in BATCH_TARGETS if k == key)
        if isinstance(a, str) or isinstance(b, str):
            value: float | str = f"n/a: {a if isinstance(a, str) else b}"[:300]
            figures = ""
        else:
            value = a - b if how == "-" else _div(a, b)
            figures = f"{_f(a)} vs {_f(b)} {unit}"
        rows.append(
            {"key": key, "label": label, "value": value, "figures": figures, "op": op}
            | {"target": target}
        )

    def tput(name: str, level: int) -> float | str:
        row = _load_row(results, name, level)
        return row if isinstance(row, str) else float(row["output_token_throughput"])

    def ttft_p50(name: str, level: int) -> float | str:
        row = _load_row(results, name, level)
        return row if isinstance(row, str) else float(row["ttft"]["p50"]) * 1e3

    raw_tps = _single(results, raw, "decode_tps")
    raw_ttft = _ms(_single(results, raw, "ttft"))
    batch_arm = f"server stream {BATCH}"
    add("batch_c4_over_c1_throughput", tput(BATCH, 4), tput(BATCH, 1), "/", "tokens/s")
    add("batch_c8_over_c1_throughput", tput(BATCH, 8), tput(BATCH, 1), "/", "tokens/s")
    add(
        "batch_decode_over_raw",
        _single(results, batch_arm, "decode_tps", BATCH),
        raw_tps,
        "/",
        "tokens/s",
    )
    server_ttft = _ms(_single(results, "server stream", "ttft", "default"))
    add("server_ttft_minus_raw_ms", server_ttft, raw_ttft, "-", "ms")
    batch_ttft = _ms(_single(results, batch_arm, "ttft", BATCH))
    add("batch_ttft_minus_raw_ms", batch_ttft, raw_ttft, "-", "ms")
    add("batch_c4_over_llama_server_c4", tput(BATCH, 4), tput(LLAMA, 4), "/", "tokens/s")
    add(
        "batch_over_generator_ttft_p50_c4",
        ttft_p50(BATCH, 4),
        ttft_p50(GENERATOR, 4),
        "/",
        "ms",
    )
    return rows


def ratios(results: dict[str, Any]) -> dict[str, Any]:
    single = results.get("single_stream", {})
    raw = _raw_arm(single)
    raw_tps, raw_ttft = _med(single, raw, "decode_tps"), _med(single, raw, "ttft")
    out: dict[str, Any] = {
        "server_decode_over_raw": _div(_med(single, "server stream", "decode_tps"), raw_tps),
        "server_ttft_minus_raw_ms": (_med(single, "server stream", "ttft") - raw_ttft) * 1e3,
        "server_reported_ttft_minus_raw_ms": (
            _med(single, "server stream", "server_ttft") - raw_ttft
        )
        * 1e3,
        "server_nonstream_e2e_over_raw": _div(
            _med(single, "server non-stream", "e2e"), _med(single, raw, "e2e")
        ),
    }
    chat = results.get("chat", {})
    for hist, rows in chat.items():
        out[f"reuse_over_no_reuse_ttft_{hist}"] = _div(
            rows.get("server default", {}).get("median", float("nan")),
            rows.get("server no-reuse", {}).get("median", float("nan")),
        )
        if f"server {BATCH}" in rows and f"server {BATCH} no-reuse" in rows:
            out[f"batch_reuse_over_no_reuse_ttft_{hist}"] = _div(
                rows[f"server {BATCH}"]["median"], rows[f"server {BATCH} no-reuse"]["median"]
            )
        out[f"raw_reuse_over_full_prefill_{hist}"] = _div(
            rows.get("raw reuse", {}).get("median", float("nan")),
            rows.get("raw full prefill", {}).get("median", float("nan")),
        )
    load = results.get("load", {})
    best_single = max(
        [_med(single, "server stream", "decode_tps"), raw_tps] + [float("nan")],
        key=lambda v: -1 if math.isnan(v) else v,
    )
    for name, kinds in load.items():
        by_c = {row["concurrency"]: row for row in kinds.get("concurrency", [])}
        if 4 in by_c:
            out[f"{name}_c4_tokens_per_s_over_best_single"] = _div(
                by_c[4]["output_token_throughput"], best_single
            )
            if 1 in by_c:
                out[f"{name}_c4_over_c1_throughput"] = _div(
                    by_c[4]["output_token_throughput"], by_c[1]["output_token_throughput"]
                )
    # ours (the batch scheduler) ÷ llama-server, level by level: tokens/s and TTFT p50
    ours = load.get(BATCH, {}).get("concurrency", [])
    theirs = {row["concurrency"]: row for row in load.get(LLAMA, {}).get("concurrency", [])}
    for row in ours:
        other = theirs.get(row["concurrency"])
        if other is not None:
            level = row["concurrency"]
            out[f"batch_over_llama_server_tokens_per_s_c{level}"] = _div(
                row["output_token_throughput"], other["output_token_throughput"]
            )
            out[f"batch_over_llama_server_ttft_p50_c{level}"] = _div(
                row["ttft"]["p50"], other["ttft"]["p50"]
            )
    for peer in ("transformers fp32", "llama.cpp Q4_0", LLAMA_ARM):
        if peer in single and "decode_tps" in single[peer]:
            key = peer.split()[0]
            out[f"raw_decode_over_{key}"] = _div(raw_tps, _med(single, peer, "decode_tps"))
            out[f"server_decode_over_{key}"] = _div(
                _med(single, "server stream", "decode_tps"), _med(single, peer, "decode_tps")
            )
            out[f"{key}_ttft_over_raw"] = _div(_med(single, peer, "ttft"), raw_ttft)
            out[f"{key}_ttft_over_server"] = _div(
                _med(single, peer, "ttft"), _med(single, "server stream", "ttft")
            )
    for row in target_rows(results):
        out[row["key"]] = row["value"]
    return out


def _f(v: Any, fmt: str = ".1f") -> str:
    try:
        x = float(v)
    except (TypeError, ValueError):
        return str(v)
    return "–" if math.isnan(x) else format(x, fmt)


def _verdict(key: str, value: Any) -> str:
    if key not in TARGETS or not isinstance(value, (int, float)) or math.isnan(value):
        return ""
    op, target = TARGETS[key]
    ok = value >= target if op == ">=" else value <= target
    return f"{op} {target}: {'met' if ok else 'MISSED'}"


def markdown(results: dict[str, Any]) -> str:
    meta, cfg = results.get("meta", {}), results.get("config", {})
    v = meta.get("versions", {})
    minutes = float(meta.get("duration_s", float("nan"))) / 60
    lines = [
        f"Measured {meta.get('date_utc')} on {meta.get('cpu_model')}, "
        f"{meta.get('usable_cpus')} usable CPUs, {meta.get('ram_gib')} GiB RAM "
        f"(shared machine), onnxruntime-genai {v.get('onnxruntime-genai')}, onnxruntime "
        f"{v.get('onnxruntime')}, source {meta.get('source', {}).get('commit')}"
        f"{' (with uncommitted changes)' if meta.get('source', {}).get('dirty') else ''}. "
        f"Model: {cfg.get('shape')}-shaped Llama, random weights; prompt ≈ "
        f"{cfg.get('prompt_tokens')} tokens, {cfg.get('new_tokens')} new tokens, greedy. "
        f"Command: `{meta.get('command')}` ({_f(minutes, '.0f')} min).",
        "",
        "### Single stream (median of the rounds, [min–max])",
        "",
        "| arm | TTFT ms | decode tokens/s | end to end s | server-reported TTFT ms | "
        "output tokens | rounds |",
        "|---|---|---|---|---|---|---|",
    ]
    for arm, row in results.get("single_stream", {}).items():
        if "error" in row and "ttft" not in row:
            lines.append(f"| {arm} | not available: {row['error'][:80]} | | | | | |")
            continue
        t, d, e = row["ttft"], row["decode_tps"], row["e2e"]
        st = row.get("server_ttft", {}).get("median", float("nan"))
        lines.append(
            f"| {arm} | {_f(t['median'] * 1e3)} [{_f(t['min'] * 1e3)}–{_f(t['max'] * 1e3)}] | "
            f"{_f(d['median'])} [{_f(d['min'])}–{_f(d['max'])}] | "
            f"{_f(e['median'], '.2f')} [{_f(e['min'], '.2f')}–{_f(e['max'], '.2f')}] | "
            f"{_f(st * 1e3)} | "
            f"{_f(row['output_tokens']['min'], '.0f')}–{_f(row['output_tokens']['max'], '.0f')} | "
            f"{row['e2e']['n']} |"
        )
    load = results.get("load", {})
    if load:
        slo = next((r["slo"] for k in load.values() for r in k.get("concurrency", [])), {})
        tpot_ms = float(slo.get("tpot_s", float("nan"))) * 1e3
        lines += [
            "",
            f"### Under load (streaming; goodput = requests/s meeting TTFT ≤ "
            f"{slo.get('ttft_s')} s and TPOT ≤ {_f(tpot_ms, '.0f')} ms)",
            "",
            "| strategy | load | req/s | out tok/s | goodput | TTFT p50/p90/p99 ms | "
            "TPOT p50/p90/p99 ms | ITL p50/p90/p99 ms | E2E p50/p90/p99 s | out tokens | "
            "client CPU | server CPU s |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        for name, kinds in load.items():
            for kind in ("concurrency", "poisson"):
                for r in kinds.get(kind, []):
                    level = f"c={r['concurrency']}" if kind == "concurrency" else f"{r['rate']}/s"

                    def p3(k: str, scale: float = 1e3, r: dict[str, Any] = r) -> str:
                        return "/".join(_f(r[k][p] * scale, ".0f") for p in ("p50", "p90", "p99"))

                    lines.append(
                        f"| {name} | {level} | {_f(r['request_throughput'], '.2f')} | "
                        f"{_f(r['output_token_throughput'])} | {_f(r['goodput'], '.2f')} | "
                        f"{p3('ttft')} | {p3('tpot')} | {p3('itl')} | "
                        f"{'/'.join(_f(r['e2e'][p], '.2f') for p in ('p50', 'p90', 'p99'))} | "
                        f"{r['output_tokens']['min']}–{r['output_tokens']['max']} | "
                        f"{_f(r['client_cpu_share'] * 100, '.0f')}% | "
                        f"{_f(r.get('server_cpu_s', float('nan')))} |"
                        + (f" errors: {r['errors']}" if r["ok"] < r["requests"] else "")
                    )
    chat = results.get("chat", {})
    if chat:
        lines += [
            "",
            "### Next chat turn: TTFT with and without prefix reuse (median ms)",
            "",
            "| history tokens | " + " | ".join(next(iter(chat.values())).keys()) + " |",
            "|---" * (1 + len(next(iter(chat.values())))) + "|",
        ]
        for hist, rows in chat.items():
            lines.append(
                f"| {hist} | " + " | ".join(_f(r["median"] * 1e3) for r in rows.values()) + " |"
            )
    lines += [
        "",
        "### Targets of the continuous-batching scheduler (`batch`)",
        "",
        "| target | value | figures | target | verdict |",
        "|---|---|---|---|---|",
    ]
    for row in target_rows(results):
        value, key = row["value"], row["key"]
        shown = _f(value, ".1f" if key.endswith("_ms") else ".3f")
        verdict = _verdict(key, value).rpartition(": ")[2] if not isinstance(value, str) else ""
        lines.append(
            f"| {row['label']} | {shown.replace('|', '/')} | {row['figures']} | "
            f"{row['op']} {row['target']} | {verdict} |"
        )
    lines += [
        "",
        "### Ratios (targets from issue 5)",
        "",
        "| ratio | value | target |",
        "|---|---|---|",
    ]
    targets = {key for key, *_ in BATCH_TARGETS}
    for key, value in results.get("ratios", {}).items():
        if key in targets and key != "server_ttft_minus_raw_ms":
            continue  # in the table above
        lines.append(f"| {key} | {_f(value, '.3f')} | {_verdict(key, value)} |")
    avail = {
        k: v
        for k, v in results.get("availability", {}).items()
        if isinstance(v, str) and v.startswith("not available")
    }
    a = results.get("availability", {})
    lines += [
        "",
        f"Server requests used the {a.get('protocol')} protocol"
        + (" with min_tokens = max_tokens" if a.get("min_tokens") else "")
        + "; output token counts are in the tables (EOS can end a request early without it).",
    ]
    if avail:
        lines += ["", "Not available in this run:", ""]
        lines += [f"- {k}: {v}" for k, v in avail.items()]
    return "\n".join(lines) + "\n"


def plots(results: dict[str, Any], out: Path) -> list[Path]:
    """PNG plots; none (and no error) when matplotlib is not installed."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return []
    made: list[Path] = []
    load = results.get("load", {})
    if load:
        fig, ax = plt.subplots(figsize=(6, 3.6), dpi=80)
        for name, kinds in load.items():
            rows = kinds.get("concurrency", [])
            ax.plot(
                [r["concurrency"] for r in rows],
                [r["output_token_throughput"] for r in rows],
                marker="o",
                label=name,
            )
        raw = results.get("single_stream", {}).get(_raw_arm(results.get("single_stream", {})))
        if raw and "decode_tps" in raw:
            ax.axhline(
                raw["decode_tps"]["median"], color="grey", ls=":", label="raw loop, 1 stream"
            )
        ax.set_ylim(bottom=0)
        ax.set_xlabel("requests in flight")
        ax.set_ylabel("output tokens/s")
        ax.set_xscale("log", base=2)
        ax.set_title("Throughput vs concurrency")
        ax.legend(fontsize=8)
        fig.tight_layout()
        made.append(out / "throughput_vs_concurrency.png")
        fig.savefig(made[-1])
        plt.close(fig)

        fig, axes = plt.subplots(1, 2, figsize=(8, 3.4), dpi=80)
        for ax, key, title in ((axes[0], "ttft", "TTFT"), (axes[1], "tpot", "TPOT")):
            for name, kinds in load.items():
                rows = kinds.get("concurrency", [])
                xs = [r["concurrency"] for r in rows]
                for p, ls in (("p50", "-"), ("p90", "--"), ("p99", ":")):
                    ax.plot(
                        xs, [r[key][p] * 1e3 for r in rows], ls=ls, marker=".", label=f"{name} {p}"
                    )
            ax.set_xscale("log", base=2)
            ax.set_xlabel("requests in flight")
            ax.set_ylabel("ms")
            ax.set_title(f"{title} percentiles")
        axes[1].legend(fontsize=6)
        fig.tight_layout()
        made.append(out / "latency_percentiles.png")
        fig.savefig(made[-1])
        plt.close(fig)
    chat = results.get("chat", {})
    if chat:
        fig, ax = plt.subplots(figsize=(6, 3.4), dpi=80)
        hists = list(chat)
        arms = [a for a in next(iter(chat.values())) if "turn 1" not in a]
        width = 0.8 / max(1, len(arms))
        for i, arm in enumerate(arms):
            ax.bar(
                [h + i * width for h in range(len(hists))],
                [chat[h][arm]["median"] * 1e3 for h in hists],
                width,
                label=arm,
            )
        ax.set_xticks([h + width * (len(arms) - 1) / 2 for h in range(len(hists))])
        ax.set_xticklabels([f"{h} tokens of history" for h in hists])
        ax.set_ylabel("TTFT of the next turn, ms")
        ax.set_title("Chat turn TTFT with / without prefix reuse")
        ax.legend(fontsize=7)
        fig.tight_layout()
        made.append(out / "chat_turn_ttft.png")
        fig.savefig(made[-1])
        plt.close(fig)
    return made
