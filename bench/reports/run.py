"""``python -m bench run``'s Markdown tables and PNG plots, from the results dict (its ratios
against the targets: bench/reports/run_ratios.py)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from bench.reports.run_ratios import BATCH_TARGETS, TARGETS, peer_rows, raw_arm, target_rows
from bench.reports.run_ratios import number as _f  # short: the tables call it on every cell


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
    lines += peer_table(results)
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
        if key in targets and key != "server_ttft_minus_raw_ms" or " over llama-server" in key:
            continue  # in the tables above
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


def peer_table(results: dict[str, Any]) -> list[str]:
    """Ours ÷ llama-server, arm by arm (run_ratios.peer_rows); nothing without llama-server."""
    rows = peer_rows(results)
    if not rows:
        return []
    levels = [k for k in rows[0] if k.startswith("aggregate_c")]
    lines = [
        "",
        "### Ours ÷ llama-server, by arm (decode and TTFT: single stream, medians; "
        "aggregate: output tokens/s under load; TTFT below 1 is ours sooner)",
        "",
        "| ours | llama-server | decode c1 | TTFT c1 | "
        + " | ".join(f"aggregate {k.removeprefix('aggregate_')}" for k in levels)
        + " |",
        "|---" * (4 + len(levels)) + "|",
    ]
    for row in rows:
        cells = [row["decode_c1"], row["ttft_c1"], *(row[k] for k in levels)]
        shown = [_f(c, ".2f") if not isinstance(c, str) else "n/a" for c in cells]
        lines.append(f"| {row['ours']} | {row['llama_server']} | " + " | ".join(shown) + " |")
    return lines


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
        raw = results.get("single_stream", {}).get(raw_arm(results.get("single_stream", {})))
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
