"""The KV-event wire format and its ZMQ publisher: three frames (topic, an 8-byte big-endian
sequence number, msgpack ``[ts, [events], dp_rank]``), each event an array led by its tag with
the fields in the order the llm-d router's vLLM adapter reads them. The publisher binds where
the settings say (``tcp://*`` on HOST, not every interface), and its memory stays bounded
whatever a subscriber does: a bounded queue that drops and counts, and a low SNDHWM."""

from __future__ import annotations

import ipaddress
import socket
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import msgpack
import pytest
import zmq

from backends.engine.kv_events import (
    AllBlocksCleared,
    BlockRemoved,
    BlockStored,
    KVEvent,
    KVEventPublisher,
    encode_batch,
)
from backends.errors import StartupError
from config.settings import ServerSettings
from tests.kv_subscriber import Subscriber

pytestmark = pytest.mark.unit


def test_a_batch_is_the_routers_positional_layout() -> None:
    events: list[KVEvent] = [
        BlockStored((11, 12), None, (1, 2, 3, 4), 2),
        BlockStored((13,), 12, (5, 6), 2, "CPU"),
        BlockRemoved((11,), "CPU"),
        AllBlocksCleared(),
    ]
    ts, decoded, rank = msgpack.unpackb(encode_batch(events, 12.5))
    assert (ts, rank) == (12.5, 0)
    # [tag, block_hashes, parent_block_hash, token_ids, block_size, lora_id, medium, lora_name]
    assert decoded[0] == ["BlockStored", [11, 12], None, [1, 2, 3, 4], 2, None, "GPU", None]
    assert decoded[1] == ["BlockStored", [13], 12, [5, 6], 2, None, "CPU", None]
    assert decoded[2] == ["BlockRemoved", [11], "CPU"]  # [tag, block_hashes, medium]
    assert decoded[3] == ["AllBlocksCleared"]


def test_a_64_bit_hash_survives_as_an_unsigned_int() -> None:
    big = 2**64 - 1
    [[_, hashes, parent, *_]] = msgpack.unpackb(
        encode_batch([BlockStored((big,), big - 1, (1,), 1)], 0.0)
    )[1]
    assert (hashes, parent) == ([big], big - 1)


@pytest.fixture()
def central() -> Iterator[Subscriber]:
    """The router's central subscriber: it binds, the pods connect."""
    sub = Subscriber("tcp://127.0.0.1", bind=True)
    yield sub
    sub.close()


def test_a_connecting_publisher_sends_three_frames_with_rising_sequence_numbers(
    central: Subscriber,
) -> None:
    address = f"tcp://127.0.0.1:{central.port}"
    publisher = KVEventPublisher(address, False, lambda m: f"kv@10.1.2.3@{m}")
    publisher.start()
    sink = publisher.sink("demo")
    # ZMQ drops what a PUB sends before the subscriber's subscription reached it: retry the
    # first until one lands, then the sequence numbers must rise by one from there.
    for _ in range(100):
        sink([BlockRemoved((1,))])
        if central.wait_for(1, 0.05):
            break
    sink([BlockStored((2,), None, (7, 8), 2)])
    sink([])  # nothing to tell: nothing sent
    sink([AllBlocksCleared()])
    publisher.close()
    messages = central.wait_for(3)
    first = int.from_bytes(messages[0][1], "big")
    assert [len(m) for m in messages[-3:]] == [3, 3, 3]
    assert [m[0] for m in messages] == [b"kv@10.1.2.3@demo"] * len(messages)
    numbers = [int.from_bytes(m[1], "big") for m in messages]
    assert all(len(m[1]) == 8 for m in messages)
    assert numbers == list(range(first, first + len(messages)))
    last = [msgpack.unpackb(m[2])[1] for m in messages[-2:]]
    assert last == [
        [["BlockStored", [2], None, [7, 8], 2, None, "GPU", None]],
        [["AllBlocksCleared"]],
    ]


def test_a_binding_publisher_serves_a_subscriber_that_connects(tmp_path: Path) -> None:
    endpoint = f"ipc://{tmp_path / 'kv.sock'}"
    publisher = KVEventPublisher(endpoint, True, lambda m: f"kv@pod@{m}")
    publisher.start()
    sub = Subscriber(endpoint, bind=False)
    try:
        sink = publisher.sink("m")
        for _ in range(100):
            sink([AllBlocksCleared()])
            if sub.wait_for(1, 0.05):
                break
        assert sub.messages[0][0] == b"kv@pod@m"
    finally:
        publisher.close()
        sub.close()


def test_an_endpoint_that_cannot_be_bound_stops_the_start(central: Subscriber) -> None:
    where = ServerSettings(kv_events_endpoint=f"tcp://*:{central.port}").kv_events_socket()
    taken = KVEventPublisher(  # in use on 127.0.0.1
        where.address, where.bind, lambda m: m, shown=f"tcp://*:{central.port}"
    )
    with pytest.raises(
        StartupError,
        match=rf"GENAI_KV_EVENTS_ENDPOINT=tcp://\*:{central.port}: cannot bind tcp://127.0.0.1:",
    ):
        taken.start()


# ---- where it listens ------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def listening_on(port: int) -> set[str]:
    """The IPv4 addresses a TCP socket listens on at ``port``, as the kernel tells them."""
    found = set()
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        local, state = line.split()[1], line.split()[3]
        address, port_hex = local.split(":")
        if state == "0A" and int(port_hex, 16) == port:  # 0A: LISTEN
            found.add(str(ipaddress.IPv4Address(bytes.fromhex(address)[::-1])))
    return found


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/net/tcp")
@pytest.mark.parametrize(
    ("endpoint", "expected"),
    [("tcp://*:{port}", {"127.0.0.1"}), ("tcp://0.0.0.0:{port}", {"0.0.0.0"})],
    ids=["wildcard-binds-HOST", "0.0.0.0-binds-every-interface"],
)
def test_the_wildcard_binds_the_http_host_not_every_interface(
    endpoint: str, expected: set[str]
) -> None:
    port = free_port()
    settings = ServerSettings(kv_events_endpoint=endpoint.format(port=port), host="127.0.0.1")
    where = settings.kv_events_socket()
    publisher = KVEventPublisher(where.address, where.bind, lambda m: m)
    publisher.start()
    try:
        assert listening_on(port) == expected
    finally:
        publisher.close()


# ---- bounded memory --------------------------------------------------------------------------


@pytest.fixture()
def silent() -> Iterator[tuple[KVEventPublisher, zmq.Socket[bytes]]]:
    """A publisher bound on loopback, and a subscriber that connects and never reads (keeping
    as little as ZMQ lets it: what piles up is the publisher's)."""
    publisher = KVEventPublisher("tcp://127.0.0.1:0", True, lambda m: f"kv@pod@{m}")
    publisher.start()
    context = zmq.Context()
    sub = context.socket(zmq.SUB)
    sub.setsockopt(zmq.RCVHWM, 1)
    sub.setsockopt(zmq.RCVBUF, 4096)
    sub.setsockopt(zmq.SUBSCRIBE, b"kv@")
    sub.connect(publisher.opened)
    time.sleep(0.2)  # the subscription reaches the publisher
    yield publisher, sub
    sub.close(0)  # first: what the publisher holds for it goes with it
    context.term()
    publisher.close()


def a_long_prompt() -> list[KVEvent]:
    """A 4,096-token prompt's BlockStored: about 13 KiB on the wire."""
    return [BlockStored(tuple(range(128)), None, tuple(range(4096)), 32)]


def resident_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/status")
def test_a_subscriber_that_never_reads_holds_at_most_sndhwm_messages(
    silent: tuple[KVEventPublisher, zmq.Socket[bytes]],
) -> None:
    """5,000 batches of 13 KiB all reach the socket (paced: none dropped from the queue); with
    vLLM's 100,000-message mark the socket kept them all (+60 MiB), with ours 1,000 (13 MiB)."""
    publisher, _ = silent
    sink, events, before = publisher.sink("m"), a_long_prompt(), resident_mib()
    for i in range(5000):
        sink(events)
        if i % 200 == 0:
            while publisher.queued > publisher.queue_size // 2:
                time.sleep(0.001)
    while publisher.queued:
        time.sleep(0.01)
    assert publisher.dropped == {}, "paced: the queue never filled"
    grown = resident_mib() - before
    assert grown < 35, f"the process grew by {grown:.0f} MiB for a subscriber that never reads"


def test_a_full_queue_drops_and_counts_rather_than_grows(
    silent: tuple[KVEventPublisher, zmq.Socket[bytes]],
) -> None:
    publisher, _ = silent
    sink, events, most = publisher.sink("m"), a_long_prompt(), 0
    for _ in range(3000):  # faster than the thread encodes and sends them
        sink(events)
        most = max(most, publisher.queued)
    assert most <= publisher.queue_size
    assert publisher.dropped["m"] > 0
    assert set(publisher.dropped) == {"m"}
