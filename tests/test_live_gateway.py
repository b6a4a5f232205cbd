"""The gateway's view of a real server process (main_genai.py): with a key set, /metrics and the
render routes answer the picker without one, the KV events of a request reach a subscriber as
the router's central subscriber binds it, and an endpoint that cannot be bound, or cannot work
at all, stops the start with one line."""

from __future__ import annotations

import socket
import time

import httpx
import msgpack
import pytest

from bench.harness.server import free_port, live_server
from tests.kv_subscriber import Subscriber
from tests.test_startup import assert_clean_failure, run_main

pytestmark = pytest.mark.live

KEY = "live-key"
CHAT = {"messages": [{"role": "user", "content": "Tell me about rivers. " * 12}], "max_tokens": 4}


def test_the_picker_reads_a_keyed_server_and_hears_its_kv_events() -> None:
    sub = Subscriber("tcp://127.0.0.1", bind=True)
    env = {
        "GENAI_API_KEY": KEY,
        "GENAI_METRICS_OPEN": "true",
        "GENAI_RENDER_OPEN": "true",
        "GENAI_KV_EVENTS_ENDPOINT": f"tcp://127.0.0.1:{sub.port}",
        "POD_IP": "10.2.3.4",
    }
    try:
        with live_server(env=env) as server:
            metrics = httpx.get(server.url + "/metrics", timeout=10)
            assert metrics.status_code == 200 and "vllm:kv_cache_usage_perc " in metrics.text
            render = httpx.post(server.url + "/v1/chat/completions/render", json=CHAT, timeout=30)
            ids = render.json()["token_ids"]
            assert httpx.post(server.url + "/v1/chat/completions", json=CHAT).status_code == 401
            answer = httpx.post(
                server.url + "/v1/chat/completions",
                json=CHAT,
                headers={"Authorization": f"Bearer {KEY}"},
                timeout=60,
            )
            assert answer.json()["usage"]["prompt_tokens"] == len(ids)
            [first, *_] = sub.wait_for(1, timeout=10)
            topic, seq, payload = first
            assert topic == f"kv@10.2.3.4:{server.port}@onnx-genai".encode()
            assert len(seq) == 8
            _, events, _ = msgpack.unpackb(payload)
            [stored] = [e for e in events if e[0] == "BlockStored"]
            assert stored[3] == ids[: len(stored[3])] and len(stored[3]) % stored[4] == 0
        # The publisher's last batch, sent as the server exits (however long it takes here).
        deadline = time.monotonic() + 30
        while (last := msgpack.unpackb(sub.messages[-1][2])[1]) != [["AllBlocksCleared"]]:
            assert time.monotonic() < deadline, last
            time.sleep(0.02)
    finally:
        sub.close()


def test_an_endpoint_in_use_stops_the_start_with_one_line() -> None:
    with socket.socket() as taken:
        taken.bind(("0.0.0.0", 0))
        taken.listen()
        port = taken.getsockname()[1]
        proc = run_main(GENAI_KV_EVENTS_ENDPOINT=f"tcp://*:{port}", PORT=str(free_port()))
    assert_clean_failure(proc, f"GENAI_KV_EVENTS_ENDPOINT=tcp://*:{port}: cannot bind")


@pytest.mark.parametrize(
    ("endpoint", "needle"),
    [
        ("tcp://*:99999", "port '99999'"),
        ("inproc://kv", "reaches only this process"),
        ("tcp://no-such-host.invalid:5557", "cannot resolve host 'no-such-host.invalid'"),
    ],
)
def test_an_endpoint_that_cannot_work_is_refused_before_anything_starts(
    endpoint: str, needle: str
) -> None:
    proc = run_main(GENAI_KV_EVENTS_ENDPOINT=endpoint)
    assert_clean_failure(proc, "Invalid settings", "GENAI_KV_EVENTS_ENDPOINT", needle)
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr


def test_an_endpoint_that_connects_to_the_pod_itself_is_refused() -> None:
    proc = run_main(GENAI_KV_EVENTS_ENDPOINT="tcp://10.9.8.7:5557", POD_IP="10.9.8.7")
    assert_clean_failure(proc, "POD_IP", "would connect to this pod's own address")
