"""The KV-event wire format and its ZMQ publisher: three frames (topic, an 8-byte big-endian
sequence number, msgpack ``[ts, [events], dp_rank]``), each event an array led by its tag with
the fields in the order the llm-d router's vLLM adapter reads them."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import msgpack
import pytest

from backends.engine.kv_events import (
    AllBlocksCleared,
    BlockRemoved,
    BlockStored,
    KVEvent,
    KVEventPublisher,
    binds,
    encode_batch,
)
from backends.errors import StartupError
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


def test_wildcards_and_local_transports_bind_the_rest_connect() -> None:
    assert binds("tcp://*:5557") and binds("ipc:///run/kv.sock") and binds("tcp://[::]:5557")
    assert not binds("tcp://epp.default.svc:5557") and not binds("tcp://127.0.0.1:5557")


@pytest.fixture()
def central() -> Iterator[Subscriber]:
    """The router's central subscriber: it binds, the pods connect."""
    sub = Subscriber("tcp://127.0.0.1", bind=True)
    yield sub
    sub.close()


def test_a_connecting_publisher_sends_three_frames_with_rising_sequence_numbers(
    central: Subscriber,
) -> None:
    publisher = KVEventPublisher(f"tcp://127.0.0.1:{central.port}", lambda m: f"kv@10.1.2.3@{m}")
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
    publisher = KVEventPublisher(endpoint, lambda m: f"kv@pod@{m}")
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
    taken = KVEventPublisher(f"tcp://*:{central.port}", lambda m: m)  # in use on 127.0.0.1
    with pytest.raises(StartupError, match=rf"GENAI_KV_EVENTS_ENDPOINT=tcp://\*:{central.port}"):
        taken.start()
