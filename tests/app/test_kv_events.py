"""KV events on the real demo model (batch scheduler), read as the llm-d router reads them: a SUB
socket on loopback decodes a scripted run, keeps the blocks each event says are held, and those
blocks must predict the cached tokens of the next request with the same prefix: from a resident
row, from the host-RAM prefix store, and none once the store has evicted them. Unloading tells
AllBlocksCleared."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import msgpack
import pytest
from fastapi.testclient import TestClient

from backends.types import KV_BLOCK_TOKENS
from config.settings import DEMO_MODEL_DIR
from tests.conftest import make_client, wait_ready
from tests.kv_subscriber import Subscriber

pytestmark = pytest.mark.model

POD = "10.9.8.7"
TOPIC = f"kv@{POD}:8002@onnx-genai".encode()  # the default topic, with the default port
SYSTEM = "You are a careful assistant. Answer in one short line, and never in a list. " * 10
OTHER = "You write haiku about rivers and nothing else, in lower case only please. " * 10


def chat(system: str, question: str) -> dict[str, Any]:
    messages = [{"role": "system", "content": system}, {"role": "user", "content": question}]
    return {"messages": messages, "max_tokens": 4, "temperature": 0}


class Index:
    """What the router's index would hold for this pod: block hash -> (parent, tokens), per
    medium, from the events in order."""

    def __init__(self) -> None:
        self.held: dict[str, dict[int, tuple[int | None, tuple[int, ...]]]] = {}
        self.cleared = 0
        self.removed = 0

    def apply(self, payload: bytes) -> None:
        _, events, _ = msgpack.unpackb(payload)
        for event in events:
            tag = event[0]
            if tag == "BlockStored":
                _, hashes, parent, tokens, size, _lora_id, medium, _lora_name = event
                tier = self.held.setdefault(medium, {})
                for i, block in enumerate(hashes):
                    assert parent is None or parent in tier, "a parent the index never saw"
                    tier[block] = (parent, tuple(tokens[i * size : (i + 1) * size]))
                    parent = block
            elif tag == "BlockRemoved":
                _, hashes, medium = event
                self.removed += len(hashes)
                for block in hashes:
                    del self.held[medium][block]
            else:
                assert event == ["AllBlocksCleared"]
                self.held.clear()
                self.cleared += 1

    def tiers(self) -> set[str]:
        """The media that hold some block."""
        return {medium for medium, blocks in self.held.items() if blocks}

    def cached_blocks(self, token_ids: list[int]) -> int:
        """How many leading blocks of ``token_ids`` some tier holds, matched by parent and
        tokens as the router recomputes its keys."""
        size, parent, count = KV_BLOCK_TOKENS, None, 0
        by_content = {
            (p, tokens): block for tier in self.held.values() for block, (p, tokens) in tier.items()
        }
        while (count + 1) * size <= len(token_ids):
            block = by_content.get((parent, tuple(token_ids[count * size : (count + 1) * size])))
            if block is None:
                break
            parent, count = block, count + 1
        return count


class Pod:
    def __init__(self, client: TestClient, sub: Subscriber) -> None:
        self.client, self.sub, self.index, self.seen = client, sub, Index(), 0

    def settle(self) -> None:
        """Apply every event sent so far (the owner thread sends them after each step, maybe
        after the answer left): once none came for 0.3 s."""
        count, quiet_since = -1, time.monotonic()
        while time.monotonic() - quiet_since < 0.3:
            if len(self.sub.messages) != count:
                count, quiet_since = len(self.sub.messages), time.monotonic()
            time.sleep(0.02)
        for topic, seq, payload in self.sub.messages[self.seen :]:
            assert topic == TOPIC and len(seq) == 8
            self.index.apply(payload)
        self.seen = len(self.sub.messages)

    def render(self, body: dict[str, Any]) -> list[int]:
        response = self.client.post("/v1/chat/completions/render", json=body)
        assert response.status_code == 200, response.text
        ids: list[int] = response.json()["token_ids"]
        return ids

    def cached_tokens(self, body: dict[str, Any]) -> int:
        response = self.client.post("/v1/chat/completions", json=body)
        assert response.status_code == 200, response.text
        usage = response.json()["usage"]
        cached: int = usage["prompt_tokens_details"]["cached_tokens"]
        return cached


@pytest.fixture()
def sub() -> Iterator[Subscriber]:
    sub = Subscriber("tcp://127.0.0.1", bind=True)  # the router's central subscriber
    yield sub
    sub.close()


def serve(sub: Subscriber, **settings: Any) -> TestClient:
    return make_client(kv_events_endpoint=f"tcp://127.0.0.1:{sub.port}", pod_ip=POD, **settings)


def test_the_blocks_a_row_holds_predict_the_next_prompts_cached_tokens(sub: Subscriber) -> None:
    with serve(sub) as client:
        wait_ready(client)
        pod = Pod(client, sub)
        first = chat(SYSTEM, "Say hello.")
        assert pod.cached_tokens(first) == 0
        pod.settle()
        # The row's blocks are the tokens it was fed: the render's, block for block.
        ids = pod.render(first)
        assert pod.index.cached_blocks(ids) == len(ids) // KV_BLOCK_TOKENS
        assert pod.index.tiers() == {"GPU"}

        second = chat(SYSTEM, "Name a colour, then a number.")
        predicted = pod.index.cached_blocks(pod.render(second))
        assert predicted >= 5  # the system prompt's blocks
        cached = pod.cached_tokens(second)  # copied from the first's resident row
        assert cached // KV_BLOCK_TOKENS == predicted

        pod.settle()
        unrelated = chat(OTHER, "Say hello.")
        assert pod.index.cached_blocks(pod.render(unrelated)) == 0
        assert pod.cached_tokens(unrelated) < KV_BLOCK_TOKENS
    pod.settle()
    assert pod.index.cleared == 1 and pod.index.tiers() == set()  # unloaded: AllBlocksCleared


def test_the_store_tells_its_blocks_and_their_eviction(sub: Subscriber) -> None:
    config = json.loads((DEMO_MODEL_DIR / "genai_config.json").read_text())["model"]["decoder"]
    per_token = 2 * 4 * config["num_hidden_layers"] * config["num_key_value_heads"]
    per_token *= config["head_size"]
    blocks = 10  # one system prompt's blocks (and its question's), not two prompts'
    store_mib = blocks * KV_BLOCK_TOKENS * per_token / 2**20
    # No row is kept: a finished sequence's blocks go to the store at once.
    with serve(sub, cache_sequences=0, prefix_store_mib=store_mib) as client:
        wait_ready(client)
        pod = Pod(client, sub)
        pod.cached_tokens(chat(SYSTEM, "Say hello."))
        pod.settle()
        assert pod.index.tiers() == {"CPU"}  # the row's blocks went, the store's came

        again = chat(SYSTEM, "Name a colour, then a number.")
        predicted = pod.index.cached_blocks(pod.render(again))
        assert predicted >= 5
        assert pod.cached_tokens(again) == predicted * KV_BLOCK_TOKENS  # whole blocks restored

        pod.settle()
        pod.cached_tokens(chat(OTHER, "Say hello."))  # its blocks push the first prompt's out
        pod.settle()
        assert pod.index.removed > 0
        third = chat(SYSTEM, "Count to three.")
        left = pod.index.cached_blocks(pod.render(third))
        assert left < predicted  # evicted, tails first
        cached = pod.cached_tokens(third)
        assert cached == left * KV_BLOCK_TOKENS if left else cached < KV_BLOCK_TOKENS
