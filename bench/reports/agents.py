"""``python -m bench agents``' table (Markdown) and plot (PNG), from its results dict."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

# The arms the table compares (the benchmark names its servers so) and the targets it judges by.
OURS, PEER = "ours", "llama-server"
# (key, what it is, ratio target ours ÷ llama-server); the targets.
TARGETS: list[tuple[str, str, float | None]] = [
    ("makespan_s", "makespan", 0.7),
    ("first_ttft_new_p50_s", "TTFT p50 of new sessions' first turns", 0.2),
    ("later_ttft_p50_s", "TTFT p50 of later turns", 0.23),
    ("itl_p50_s", "inter-token latency median", None),
    ("itl_p99_s", "inter-token latency p99", None),
    ("cached_tokens", "cached prompt tokens (usage), all turns", None),
]


def _fmt(value: Any, key: str) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "—"
    if key == "cached_tokens":
        return f"{value:,.0f}"
    if key.startswith("itl"):
        return f"{value * 1e3:.0f} ms"
    return f"{value:.2f} s"


def _ratio(by_arm: dict[str, Any], arm: str, key: str) -> str:
    """`` (0.42×)``: the arm's figure ÷ llama-server's, when both were measured."""
    ratio = by_arm.get(arm, {}).get(key, {}).get("ratio", float("nan"))
    return "" if ratio != ratio else f" ({ratio:.2f}×)"


def markdown(results: dict[str, Any]) -> str:
    cfg, meta = results["config"], results["meta"]
    summary, ratios = results["summary"], results["ratios"]
    peer = results["availability"].get(PEER, "ok")
    lines = [
        f"{cfg['sessions']} sessions {cfg['stagger']} s apart, one shared {cfg['prefix_tokens']}"
        f"-token system prompt, {cfg['turns']} turns each ({cfg['user_tokens']}-token user "
        f"messages, {cfg['reply_tokens']}-token answers), {cfg['rounds']} round(s) per arm, "
        f"arms alternating; medians over rounds. Measured {meta.get('date_utc', '?')} on "
        f"{meta.get('cpu_model', '?')}, {meta.get('usable_cpus', '?')} usable CPUs, "
        f"onnxruntime-genai {meta.get('versions', {}).get('onnxruntime-genai', '?')}; model "
        f"{cfg.get('shape', '?')}, {PEER} on its {cfg.get('llama_quant', 'Q4_0')} GGUF.",
        "",
        f"| measure | {OURS} | {PEER} | {OURS} ÷ {PEER} | target |",
        "|---|---|---|---|---|",
    ]
    for key, what, target in TARGETS:
        ours = summary.get(OURS, {}).get(key)
        theirs = summary.get(PEER, {}).get(key)
        r = ratios.get(key, {})
        ratio = r.get("ratio", float("nan"))
        ratio_s = "—" if ratio != ratio else f"{ratio:.2f}"
        if r.get("per_round") and len(r["per_round"]) > 1:
            lo, hi = min(r["per_round"]), max(r["per_round"])
            ratio_s += f" ({lo:.2f}–{hi:.2f})"
        verdict = (
            "—"
            if target is None
            else f"≤ {target}"
            + (" ✅" if r.get("met") else (" ❌" if r.get("met") is False else ""))
        )
        lines.append(
            f"| {what} | {_fmt(ours, key)} | {_fmt(theirs, key)} | {ratio_s} | {verdict} |"
        )
    others = [a for a in summary if a not in (OURS, PEER)]
    if others:
        by_arm = results.get("ratios_by_arm", {})
        if any(by_arm.values()):
            lines += ["", "In brackets: the arm's figure ÷ llama-server's, medians over rounds."]
        lines += ["", f"| measure | {OURS} | " + " | ".join(others) + " |"]
        lines.append("|---|---|" + "---|" * len(others))
        for key, what, _ in TARGETS:
            cells = [_fmt(summary[a].get(key), key) + _ratio(by_arm, a, key) for a in others]
            lines.append(
                f"| {what} | {_fmt(summary[OURS].get(key), key)} | " + " | ".join(cells) + " |"
            )
    if peer != "ok":
        lines += ["", f"llama-server: {peer}"]
    ours_rounds = [r[OURS] for r in results["rounds"] if OURS in r]
    if ours_rounds:
        first = [r["first_ttft_first_session_s"] for r in ours_rounds]
        lines += [
            "",
            "The first session's first turn (nothing to share yet), ours: "
            + ", ".join(f"{v:.2f} s" for v in first)
            + " per round.",
        ]
    lines += ["", f"Command: `{cfg['command']}`."]
    command = results.get("versions_peers", {}).get(PEER, {}).get("command")
    if command:
        lines += ["", f"llama-server command: `{command}`"]
    return "\n".join(lines) + "\n"


def plot(results: dict[str, Any], path: Path) -> Path | None:
    """The last round's timeline per arm: a bar per turn from sent to done, a tick at its
    first token. None when matplotlib is missing."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    last = results["rounds"][-1] if results["rounds"] else {}
    arms = [a for a in (OURS, PEER) if a in last]
    if not arms:
        return None
    fig, axes = plt.subplots(len(arms), 1, figsize=(7, 1.0 + 1.3 * len(arms)), dpi=80)
    axes = axes if len(arms) > 1 else [axes]
    end = max(last[a]["raw"]["makespan_s"] for a in arms)
    colors = ["tab:blue", "tab:orange", "tab:green", "tab:red"]
    for ax, arm in zip(axes, arms, strict=True):
        for t in last[arm]["raw"]["turns"]:
            y, color = t["session"], colors[t["turn"] % len(colors)]
            ax.barh(y, t["e2e"], left=t["sent"], height=0.6, color=color, alpha=0.55)
            ax.plot([t["sent"] + t["ttft"]] * 2, [y - 0.3, y + 0.3], color="black", lw=1)
        ax.set_xlim(0, end * 1.02)
        ax.set_yticks(range(int(results["config"]["sessions"])))
        ax.set_ylabel("session")
        ax.set_title(f"{arm}: makespan {last[arm]['raw']['makespan_s']:.1f} s", fontsize=9)
    axes[-1].set_xlabel("seconds (bars: turns, colour by turn; tick: first token)")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


def write(results: dict[str, Any], out: Path, docs: Path | None) -> None:
    """results.md and agents.png into ``out``; the same into ``docs`` as agents.md/.png."""
    text = "# Agent-shaped workload\n\n" + markdown(results)
    (out / "results.md").write_text(text)
    plot(results, out / "agents.png")
    if docs is not None:
        docs.mkdir(parents=True, exist_ok=True)
        (docs / "agents.md").write_text(text)
        plot(results, docs / "agents.png")
