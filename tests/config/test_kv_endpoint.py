"""GENAI_KV_EVENTS_ENDPOINT read at start: tcp://*:PORT binds the server's own address (POD_IP,
else HOST), 0.0.0.0 and [::] bind every interface, ipc:// binds, any other host connects; what
cannot work is refused with one line, before anything is opened."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from config.kv_endpoint import KVEventsSocket, kv_events_socket, parse_endpoint
from config.settings import ServerSettings

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("endpoint", "pod_ip", "host", "expected"),
    [
        ("tcp://*:5557", "", "127.0.0.1", KVEventsSocket("tcp://127.0.0.1:5557", True)),
        ("tcp://*:5557", "10.0.0.7", "0.0.0.0", KVEventsSocket("tcp://10.0.0.7:5557", True)),
        ("tcp://*:5557", "", "::1", KVEventsSocket("tcp://[::1]:5557", True)),
        ("tcp://*:5557", "fd00::7", "x", KVEventsSocket("tcp://[fd00::7]:5557", True)),
        ("tcp://0.0.0.0:5560", "10.0.0.7", "x", KVEventsSocket("tcp://0.0.0.0:5560", True)),
        ("tcp://[::]:5560", "", "x", KVEventsSocket("tcp://[::]:5560", True)),
        ("ipc:///run/kv.sock", "", "x", KVEventsSocket("ipc:///run/kv.sock", True)),
        ("tcp://127.0.0.1:5557", "", "x", KVEventsSocket("tcp://127.0.0.1:5557", False)),
        ("tcp://localhost:5557", "10.0.0.7", "x", KVEventsSocket("tcp://localhost:5557", False)),
        ("tcp://[::1]:5557", "", "x", KVEventsSocket("tcp://[::1]:5557", False)),
    ],
)
def test_each_form_binds_or_connects_where_it_says(
    endpoint: str, pod_ip: str, host: str, expected: KVEventsSocket
) -> None:
    assert kv_events_socket(endpoint, pod_ip, host) == expected


def test_the_settings_bind_the_wildcard_to_the_pod_else_to_host() -> None:
    on_host = ServerSettings(kv_events_endpoint="tcp://*:5557", host="127.0.0.1")
    assert on_host.kv_events_socket() == KVEventsSocket("tcp://127.0.0.1:5557", True)
    in_pod = ServerSettings(kv_events_endpoint="tcp://*:5557", host="0.0.0.0", pod_ip="10.1.2.3")
    assert in_pod.kv_events_socket() == KVEventsSocket("tcp://10.1.2.3:5557", True)


@pytest.mark.parametrize(
    ("endpoint", "needle"),
    [
        ("tcp://*:99999", "port '99999'"),
        ("tcp://*:0", "port '0'"),
        ("tcp://*:*", "port '*'"),
        ("tcp://127.0.0.1:*", "port '*'"),
        ("tcp://*:", "port ''"),
        ("tcp://*:55x", "port '55x'"),
        ("tcp://5557", "must be tcp://HOST:PORT"),
        ("tcp://:5557", "must be tcp://HOST:PORT"),
        ("inproc://kv", "reaches only this process"),
        ("pgm://eth0;239.1.1.1:5555", "must be tcp://HOST:PORT or ipc://PATH"),
        ("localhost:5557", "must be tcp://HOST:PORT or ipc://PATH"),
        ("http://epp:5557", "must be tcp://HOST:PORT or ipc://PATH"),
        ("ipc://", "needs a path"),
        ("ipc://*", "needs a path"),
        ("ipc:///" + "x" * 200, "longer than 107 bytes"),
        ("tcp://no-such-host.invalid:5557", "cannot resolve host 'no-such-host.invalid'"),
        ("tcp://::1:5557", "in brackets: tcp://[::1]:5557"),
    ],
)
def test_what_cannot_work_is_refused(endpoint: str, needle: str) -> None:
    with pytest.raises(ValueError) as caught:
        parse_endpoint(endpoint)
    assert needle in str(caught.value)
    with pytest.raises(ValidationError) as refused:
        ServerSettings(kv_events_endpoint=endpoint)
    [error] = refused.value.errors()
    assert error["loc"] == ("kv_events_endpoint",) and needle in error["msg"]


def test_connecting_to_the_pods_own_address_is_refused() -> None:
    with pytest.raises(ValidationError) as refused:
        ServerSettings(kv_events_endpoint="tcp://10.0.0.7:5557", pod_ip="10.0.0.7")
    [error] = refused.value.errors()
    assert error["loc"] == ("pod_ip",)
    assert "tcp://10.0.0.7:5557 would connect to this pod's own address" in error["msg"]
    assert "tcp://*:PORT binds it" in error["msg"]
    # Another host (the router's central subscriber) connects, as before.
    other = ServerSettings(kv_events_endpoint="tcp://10.0.0.8:5557", pod_ip="10.0.0.7")
    assert other.kv_events_socket() == KVEventsSocket("tcp://10.0.0.8:5557", False)


def test_pod_ip_must_be_an_address() -> None:
    with pytest.raises(ValidationError, match="'my-pod' is not an IP address"):
        ServerSettings(pod_ip="my-pod")
    assert ServerSettings(pod_ip=" 10.0.0.7 ").pod_ip == "10.0.0.7"
