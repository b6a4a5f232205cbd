"""``python -m bench spec``'s table: per arm and level, the medians over rounds, and each
arm's per-round ratios to the first arm with their range and the median's confidence
interval (:mod:`bench.benchmarks.spec` gathers the rounds)."""

from __future__ import annotations

import math
import statistics
from typing import Any


def render_table(
    samples: dict[tuple[str, str, str, int], list[dict[str, Any]]],
    names: list[str],
    workloads: tuple[str, ...],
    conditions: tuple[str, ...],
    levels: tuple[int, ...],
) -> str:
    """Medians over rounds; ratios against the first arm, per round, then the median and the
    range."""
    lines = [
        "| workload | sampling | in flight | arm | decode tok/s per request | ÷ first (range) | "
        "time per answer | ÷ first (range) | server CPU ms per token | ÷ first (range) | "
        "engine CPU ms per token | ÷ first (range) | "
        "accepted / drafted | mean accepted length | copied fraction | tokens per answer |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for workload in workloads:
        for condition in conditions:
            for level in levels:
                base = samples.get((names[0], workload, condition, level), [])
                for name in names:
                    runs = samples.get((name, workload, condition, level), [])
                    if runs:
                        cells = " | ".join(_row(runs, base))
                        lines.append(f"| {workload} | {condition} | {level} | {name} | {cells} |")
    loads = [r["load"] for runs in samples.values() for r in runs]
    if loads:
        lines.append(f"\nload average (1 min) while it ran: {min(loads):.1f} to {max(loads):.1f}")
    return "\n".join(lines) + "\n"


def _row(runs: list[dict[str, Any]], base: list[dict[str, Any]]) -> list[str]:
    """One arm's cells at one level: its rounds (``runs``) against the first arm's."""
    med = statistics.median
    pairs = list(zip(runs, base, strict=False))

    def measure(key: str) -> tuple[float, list[float]]:
        own = [med(r[key]) if isinstance(r[key], list) else r[key] for r in runs if r.get(key)]
        ratios = [
            (med(a[key]) / med(b[key])) if isinstance(a[key], list) else a[key] / b[key]
            for a, b in pairs
            if a.get(key) and b.get(key)
        ]
        return (med(own) if own else float("nan")), ratios

    rate, rate_x = measure("decode")
    e2e, e2e_x = measure("e2e")
    cpu, cpu_x = measure("cpu_per_token")
    engine, engine_x = measure("engine_cpu_per_token")
    drafted, accepted, verify = (sum(r["speculation"][i] for r in runs) for i in range(3))
    copied = statistics.mean(c for r in runs for c in r["copied"])
    tokens = statistics.mean(t for r in runs for t in r["tokens"])
    return [
        f"{rate:.0f}",
        _ratio(rate_x),
        f"{e2e * 1e3:.0f} ms",
        _ratio(e2e_x),
        f"{cpu * 1e3:.2f}",
        _ratio(cpu_x),
        f"{engine * 1e3:.3f}" if engine == engine else "—",
        _ratio(engine_x),
        f"{accepted / drafted:.2f} ({accepted}/{drafted})" if drafted else "—",
        f"{1 + accepted / verify:.2f}" if verify else "—",
        f"{copied:.2f}",
        f"{tokens:.0f}",
    ]


def _ratio(values: list[float]) -> str:
    """The median of the rounds' ratios, their range and, with enough rounds, the median's
    95% confidence interval."""
    if not values:
        return "—"
    text = f"{statistics.median(values):.2f} ({min(values):.2f}–{max(values):.2f}"
    interval = median_interval(values)
    if interval is not None:
        text += f"; 95% CI {interval[0]:.2f}–{interval[1]:.2f}"
    return text + ")"


def median_interval(values: list[float], confidence: float = 0.95) -> tuple[float, float] | None:
    """A distribution-free confidence interval of the median of ``values``: the order
    statistics ``x(j)`` and ``x(n + 1 - j)`` for the largest ``j`` whose binomial coverage,
    ``1 - 2 P(Binomial(n, 1/2) < j)``, is still at least ``confidence``. None with too few
    values for any (fewer than 6 at 95%). What shows whether two arms differ by more than a
    bar, where single rounds spread wider than the bar."""
    xs, n = sorted(values), len(values)
    below, best = 0, 0  # P(Binomial(n, 1/2) < j) * 2**n
    for j in range(1, n // 2 + 1):
        below += math.comb(n, j - 1)
        if 1 - 2 * below / 2**n < confidence:
            break
        best = j
    return (xs[best - 1], xs[n - best]) if best else None
