"""The settings for the inference gateway: off by default, a ZMQ endpoint and a topic template
checked at start, and the topic each model publishes its KV events on."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from config.settings import ServerSettings

pytestmark = pytest.mark.unit


def test_everything_for_the_gateway_is_off_by_default() -> None:
    server = ServerSettings()
    assert (server.metrics_open, server.render_open, server.kv_events_endpoint) == (
        False,
        False,
        "",
    )


@pytest.mark.parametrize("endpoint", ["tcp://*:5557", "tcp://localhost:5557", "ipc:///run/kv"])
def test_zmq_endpoints_are_taken(endpoint: str) -> None:
    assert ServerSettings(kv_events_endpoint=f" {endpoint} ").kv_events_endpoint == endpoint


@pytest.mark.parametrize("endpoint", ["localhost:5557", "http://epp:5557"])
def test_what_zmq_cannot_open_is_refused(endpoint: str) -> None:
    # More refusals in test_kv_endpoint.py.
    with pytest.raises(ValidationError, match="must be tcp://HOST:PORT or ipc://PATH"):
        ServerSettings(kv_events_endpoint=endpoint)


@pytest.mark.parametrize("topic", ["kv@{pod}@{model}", "kv@{0}", "kv@{pod_ip"])
def test_a_topic_with_other_fields_is_refused(topic: str) -> None:
    with pytest.raises(ValidationError, match=r"only \{pod_ip\}, \{port\} and \{model\}"):
        ServerSettings(kv_events_topic=topic)


def test_the_topic_names_the_pod_its_port_and_the_model() -> None:
    server = ServerSettings(port=8000, pod_ip="10.0.0.7")
    assert server.kv_events_topic_for("qwen", "192.168.1.1") == "kv@10.0.0.7:8000@qwen"
    unset = ServerSettings(port=8000)
    assert unset.kv_events_topic_for("qwen", "192.168.1.1") == "kv@192.168.1.1:8000@qwen"
    plain = ServerSettings(kv_events_topic="kv@{pod_ip}@{model}", pod_ip="10.0.0.7")
    assert plain.kv_events_topic_for("qwen", "x") == "kv@10.0.0.7@qwen"


def test_kv_events_need_one_worker() -> None:
    with pytest.raises(ValidationError, match="GENAI_KV_EVENTS_ENDPOINT needs WORKERS=1"):
        ServerSettings(kv_events_endpoint="tcp://*:5557", workers=2)
    assert ServerSettings(kv_events_endpoint="tcp://*:5557", workers=2, reload=True).workers == 1
