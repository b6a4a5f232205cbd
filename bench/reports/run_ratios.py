"""``python -m bench run``'s ratios against its targets, from the results dict."""

from __future__ import annotations

import math
from typing import Any

TARGETS = {
    "server_decode_over_raw": (">=", 0.97),
    "server_ttft_minus_raw_ms": ("<=", 5.0),
    "reuse_over_no_reuse_ttft_1024": ("<=", 0.15),
}

BATCH, GENERATOR, LLAMA = "scheduler=batch", "scheduler=generator", "llama-server"
LLAMA_ARM = "llama-server Q4_0"
VARIANT = "ours "  # a --variant arm's name starts so (bench/benchmarks/run_config.py variant_arm)
# our arms against llama-server's, in the peer table: the batch scheduler on the export (else
# the default server, where no scheduler was asked for), and speculation off and on on the
# build with every position's logits (bench/benchmarks/run_config.py SPEC_OFF, SPEC_ON)
OUR_PEER_ARMS = (BATCH, "speculation=off", "speculation=on")

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


def raw_arm(single: dict[str, Any]) -> str:
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


def llama_arms(results: dict[str, Any]) -> list[str]:
    """llama-server's load arms by name (``llama-server Q4_0``, ...; a results file from
    before the arms were named by type has one, ``llama-server``)."""
    return [k for k in results.get("load", {}) if k == LLAMA or k.startswith(LLAMA + " ")]


def _stream_arm(name: str) -> str:
    """The single-stream arm of load arm ``name``."""
    if name.startswith(LLAMA):
        return name
    return "server stream" if name == "default" else f"server stream {name}"


def peer_rows(results: dict[str, Any]) -> list[dict[str, Any]]:
    """Ours ÷ llama-server for every pair of our arm (``OUR_PEER_ARMS`` that ran, the default
    server in place of ``batch`` where that did not, and every ``--variant``) and llama-server
    arm: single-stream decode tokens/s and TTFT, and the aggregate output tokens/s at each
    level in flight. A ratio is "n/a: why" where a side is missing."""
    load = results.get("load", {})
    first = BATCH if BATCH in load else "default"
    ours = [n for n in (first, *OUR_PEER_ARMS[1:]) if n in load]
    ours += [n for n in load if n.startswith(VARIANT)]
    levels = sorted({r["concurrency"] for n in ours for r in load[n].get("concurrency", [])})
    rows = []
    for mine in ours:
        for theirs in llama_arms(results):
            row: dict[str, Any] = {"ours": mine, "llama_server": theirs}
            for key, label in (("decode_tps", "decode_c1"), ("ttft", "ttft_c1")):
                a = _single(results, _stream_arm(mine), key, mine)
                b = _single(results, _stream_arm(theirs), key, theirs)
                row[label] = _ratio(a, b)
            for level in levels:
                a_row, b_row = _load_row(results, mine, level), _load_row(results, theirs, level)
                row[f"aggregate_c{level}"] = _ratio(
                    a_row if isinstance(a_row, str) else float(a_row["output_token_throughput"]),
                    b_row if isinstance(b_row, str) else float(b_row["output_token_throughput"]),
                )
            rows.append(row)
    return rows


def _ratio(a: float | str, b: float | str) -> float | str:
    if isinstance(a, str) or isinstance(b, str):
        return f"n/a: {a if isinstance(a, str) else b}"[:200]
    return _div(a, b)


def target_rows(results: dict[str, Any]) -> list[dict[str, Any]]:
    """The targets of ``BATCH_TARGETS``: key, label, value (or "n/a: why"), the figures
    compared, op and target."""
    single = results.get("single_stream", {})
    raw = raw_arm(single)
    rows: list[dict[str, Any]] = []

    def add(key: str, a: float | str, b: float | str, how: str, unit: str) -> None:
        label, op, target = next((lab, o, t) for k, lab, o, t in BATCH_TARGETS if k == key)
        if isinstance(a, str) or isinstance(b, str):
            value: float | str = f"n/a: {a if isinstance(a, str) else b}"[:300]
            figures = ""
        else:
            value = a - b if how == "-" else _div(a, b)
            figures = f"{number(a)} vs {number(b)} {unit}"
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
    llama = next(iter(llama_arms(results)), LLAMA_ARM)
    add("batch_c4_over_llama_server_c4", tput(BATCH, 4), tput(llama, 4), "/", "tokens/s")
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
    raw = raw_arm(single)
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
    llama = next(iter(llama_arms(results)), LLAMA_ARM)
    theirs = {row["concurrency"]: row for row in load.get(llama, {}).get("concurrency", [])}
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
    for row in peer_rows(results):
        pair = f"{row['ours']} over {row['llama_server']}"
        for key, value in row.items():
            if key not in ("ours", "llama_server"):
                out[f"{pair} {key}"] = value
    return out


def number(v: Any, fmt: str = ".1f") -> str:
    """``v`` formatted, "–" for NaN, itself when not a number."""
    try:
        x = float(v)
    except (TypeError, ValueError):
        return str(v)
    return "–" if math.isnan(x) else format(x, fmt)
