"""``python -m bench agents``' workload logic against a fake server (httpx's MockTransport):
each turn carries the whole history, prefixes are fresh per run and shared within one, and the
figures and ratios are computed from the right turns."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest

from bench.benchmarks.agents import AgentConfig, Workload, ratios, run_workload, summarize
from bench.harness.clients import make_client
from bench.reports.agents import OURS, PEER

pytestmark = pytest.mark.unit


class Tokenizer:
    """One token per word; the "chat template" renders each message as its words."""

    def encode(self, text: str) -> list[int]:
        return [len(w) for w in text.split()]

    def apply_chat_template(self, messages: str, add_generation_prompt: bool = True) -> str:
        return " ".join(m["content"] for m in json.loads(messages))


class Prompts:
    def __init__(self) -> None:
        self.tok = Tokenizer()

    def render(self, messages: list[dict[str, str]]) -> list[int]:
        return self.tok.encode(self.tok.apply_chat_template(json.dumps(messages)))


class FakeServer:
    """Streams ``answer-<n>`` word by word for the n-th request, with usage at the end, and
    records every request body."""

    def __init__(self, cached: int = 7) -> None:
        self.bodies: list[dict[str, Any]] = []
        self.cached = cached

    def handler(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        self.bodies.append(body)
        words = [f"answer-{len(self.bodies)}", "done"]
        key = "text" if request.url.path == "/v1/completions" else "delta"
        events: list[dict[str, Any]] = []
        for w in words:
            choice = {"text": w + " "} if key == "text" else {"delta": {"content": w + " "}}
            events.append({"choices": [choice]})
        usage = {
            "prompt_tokens": 100,
            "completion_tokens": len(words),
            "prompt_tokens_details": {"cached_tokens": self.cached},
        }
        events.append({"choices": [], "usage": usage})
        text = "".join(f"data: {json.dumps(e)}\n\n" for e in events) + "data: [DONE]\n\n"
        return httpx.Response(200, text=text, headers={"content-type": "text/event-stream"})


def config(**kw: Any) -> AgentConfig:
    base = {"sessions": 3, "prefix_tokens": 40, "turns": 3, "stagger": 0.0, "user_tokens": 6}
    return AgentConfig(**(base | kw))


def drive(server: FakeServer, work: Workload, protocol: str = "openai") -> dict[str, Any]:
    client = make_client("http://fake", protocol=protocol)

    async def go() -> dict[str, Any]:
        transport = httpx.MockTransport(server.handler)
        async with httpx.AsyncClient(transport=transport) as http:
            return await run_workload(client, http, work)

    return asyncio.run(go())


def test_each_turn_sends_the_history_plus_the_answer_and_a_new_user_message() -> None:
    server, work = FakeServer(), Workload(Prompts(), config(), seed=1)  # type: ignore[arg-type]
    run = drive(server, work)
    assert len(run["turns"]) == 9 and all(t["error"] is None for t in run["turns"])
    by_session: dict[str, list[list[dict[str, str]]]] = {}
    for body in server.bodies:
        by_session.setdefault(body["messages"][1]["content"], []).append(body["messages"])
    assert len(by_session) == 3  # a different first user message per session
    for turns in by_session.values():
        assert [len(m) for m in turns] == [2, 4, 6]
        for before, after in zip(turns, turns[1:], strict=False):
            assert after[: len(before)] == before  # the history is kept as it was
            assert after[len(before)]["role"] == "assistant"
            assert after[len(before)]["content"].startswith("answer-")
            assert after[len(before) + 1]["role"] == "user"
        users = [m["content"] for m in turns[-1] if m["role"] == "user"]
        assert len(set(users)) == 3
    assert all(b["max_tokens"] == work.cfg.reply_tokens for b in server.bodies)


def test_the_prefix_is_shared_within_a_run_and_fresh_across_runs() -> None:
    prompts = Prompts()
    one, two = Workload(prompts, config(), 1), Workload(prompts, config(), 2)  # type: ignore[arg-type]
    assert one.opening(0)[0] == one.opening(2)[0]  # the same system prompt in every session
    assert one.opening(0)[1] != one.opening(1)[1]
    assert one.prefix != two.prefix
    assert one.prefix.split()[:4] != two.prefix.split()[:4]  # different from the start
    assert abs(len(prompts.tok.encode(one.prefix)) - 40) <= 2


def test_the_peer_gets_the_rendered_token_ids() -> None:
    server, work = FakeServer(), Workload(Prompts(), config(sessions=1, turns=2), seed=3)  # type: ignore[arg-type]
    drive(server, work, protocol="completions")
    first, second = server.bodies
    assert isinstance(first["prompt"], list) and all(isinstance(i, int) for i in first["prompt"])
    assert second["prompt"][: len(first["prompt"])] == first["prompt"]
    assert len(second["prompt"]) > len(first["prompt"])


def test_summary_figures_come_from_the_right_turns() -> None:
    def turn(session: int, k: int, ttft: float, itl: list[float], cached: int | None) -> Any:
        return {
            "session": session,
            "turn": k,
            "sent": 0.0,
            "ttft": ttft,
            "e2e": ttft + sum(itl),
            "itl": itl,
            "prompt_tokens": 10,
            "output_tokens": len(itl) + 1,
            "cached_tokens": cached,
            "error": None,
        }

    run = {
        "makespan_s": 9.0,
        "turns": [
            turn(0, 0, 5.0, [0.1], None),  # the first session: nothing to share
            turn(1, 0, 1.0, [0.1], 30),
            turn(2, 0, 3.0, [0.1], 30),
            turn(0, 1, 0.2, [0.1, 0.1], 50),
            turn(1, 1, 0.4, [0.1, 0.9], 60),
        ],
    }
    s = summarize(run)
    assert s["makespan_s"] == 9.0
    assert s["first_ttft_new_p50_s"] == 2.0  # sessions 1 and 2 only
    assert s["first_ttft_first_session_s"] == 5.0
    assert s["later_ttft_p50_s"] == pytest.approx(0.3)
    assert s["itl_p50_s"] == pytest.approx(0.1) and s["itl_p99_s"] > 0.8
    assert s["cached_tokens"] == 170 and s["cached_tokens_first_turns"] == 60
    assert s["turns_ok"] == 5


def test_ratios_are_per_round_then_median_with_targets() -> None:
    rounds = [
        {OURS: {"makespan_s": 6.0, "first_ttft_new_p50_s": 1.0}, PEER: {"makespan_s": 10.0}},
        {OURS: {"makespan_s": 8.0, "first_ttft_new_p50_s": 1.0}, PEER: {"makespan_s": 10.0}},
    ]
    r = ratios(rounds)
    assert r["makespan_s"]["per_round"] == [0.6, 0.8]
    assert r["makespan_s"]["ratio"] == pytest.approx(0.7) and r["makespan_s"]["met"] is True
    assert r["first_ttft_new_p50_s"]["met"] is None  # the peer's figure is missing
