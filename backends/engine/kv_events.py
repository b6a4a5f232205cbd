"""KV-cache events for prefix-aware routing, in the wire format the llm-d router reads (vLLM's
``vllm/distributed/kv_events.py``, as its ``VLLMAdapter`` decodes it).

Each message is three ZMQ frames: the topic (``kv@<pod>@<model>``), a sequence number as 8
big-endian bytes, and a msgpack payload ``[ts, [event, ...], dp_rank]``. An event is an array
led by its name (msgspec's ``tag=True, array_like=True`` encoding):

- ``["BlockStored", block_hashes, parent_block_hash, token_ids, block_size, lora_id, medium,
  lora_name]``: full blocks now held, each hash chained on the one before, the first on
  ``parent_block_hash`` (None: the prompt's start); ``token_ids`` are all their tokens;
- ``["BlockRemoved", block_hashes, medium]``;
- ``["AllBlocksCleared"]``.

The router keys blocks by hashes it computes itself from ``token_ids`` (and the model); ours
only name blocks between a ``BlockStored`` and its ``BlockRemoved``, and a parent. ``medium``
is vLLM's tier: "GPU" for the engine's own KV (our rows), "CPU" for its offload (our host-RAM
prefix store), which the router weighs lower by default.

One PUB socket serves the process; each model publishes on its own topic. The socket lives on
the publisher's own thread (ZMQ sockets are not thread-safe, and every model's owner thread
publishes): a publish is a queue put.
"""

from __future__ import annotations

import logging
import queue
import socket
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import msgpack
import zmq

from backends.errors import StartupError

log = logging.getLogger("genai.kv_events")

GPU, CPU = "GPU", "CPU"  # vLLM's media: the engine's own KV, and its offload tier


@dataclass(frozen=True)
class BlockStored:
    hashes: tuple[int, ...]
    parent: int | None
    token_ids: tuple[int, ...]
    block_size: int
    medium: str = GPU

    def wire(self) -> list[Any]:
        return [
            "BlockStored",
            list(self.hashes),
            self.parent,
            list(self.token_ids),
            self.block_size,
            None,  # lora_id: the batch engine runs no adapter
            self.medium,
            None,  # lora_name
        ]


@dataclass(frozen=True)
class BlockRemoved:
    hashes: tuple[int, ...]
    medium: str = GPU

    def wire(self) -> list[Any]:
        return ["BlockRemoved", list(self.hashes), self.medium]


@dataclass(frozen=True)
class AllBlocksCleared:
    def wire(self) -> list[Any]:
        return ["AllBlocksCleared"]


KVEvent = BlockStored | BlockRemoved | AllBlocksCleared
KVEventSink = Callable[[Sequence[KVEvent]], None]


def encode_batch(events: Sequence[KVEvent], ts: float, dp_rank: int = 0) -> bytes:
    packed: bytes = msgpack.packb([ts, [e.wire() for e in events], dp_rank])
    return packed


def binds(endpoint: str) -> bool:
    """vLLM's rule: a wildcard address (or ipc/inproc) is bound, any other is connected to
    (the router's central subscriber binds; a per-pod one connects to the pod's)."""
    return "*" in endpoint or "::" in endpoint or endpoint.startswith(("ipc://", "inproc://"))


def host_address() -> str:
    """The address this host's name resolves to (the pod IP when POD_IP is not set)."""
    try:
        return socket.gethostbyname(socket.gethostname())
    except OSError:
        return "127.0.0.1"


class KVEventPublisher:
    def __init__(self, endpoint: str, topic_for: Callable[[str], str], hwm: int = 100_000):
        self.endpoint = endpoint
        self.topic_for = topic_for
        self._hwm = hwm
        self._queue: queue.SimpleQueue[tuple[bytes, list[KVEvent], float] | None]
        self._queue = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name="kv-events", daemon=True)
        self._ready = threading.Event()
        self._error: Exception | None = None

    def start(self, timeout: float = 10.0) -> None:
        """Open the socket (on the publisher's thread); a StartupError if it cannot be.
        Once started, starting again does nothing."""
        if self._thread.is_alive() or self._ready.is_set():
            return
        self._thread.start()
        self._ready.wait(timeout)
        if self._error is not None:
            raise StartupError(
                f"GENAI_KV_EVENTS_ENDPOINT={self.endpoint}: cannot "
                f"{'bind' if binds(self.endpoint) else 'connect'}: {self._error}"
            )
        log.info(
            "KV events on %s (%s)", self.endpoint, "bound" if binds(self.endpoint) else "connected"
        )

    def sink(self, model: str) -> KVEventSink:
        """Where ``model``'s engine sends its events: its topic on this socket."""
        topic = self.topic_for(model).encode()

        def publish(events: Sequence[KVEvent]) -> None:
            if events:
                self._queue.put((topic, list(events), time.time()))

        return publish

    def close(self, timeout: float = 2.0) -> None:
        """Send what is queued (the models' last AllBlocksCleared), then close."""
        if self._thread.is_alive():
            self._queue.put(None)
            self._thread.join(timeout)

    def _run(self) -> None:
        context = zmq.Context()
        pub = context.socket(zmq.PUB)
        pub.set_hwm(self._hwm)
        pub.setsockopt(zmq.LINGER, 1000)  # what is queued at close still goes, for 1 s
        try:
            (pub.bind if binds(self.endpoint) else pub.connect)(self.endpoint)
        except zmq.ZMQError as exc:
            self._error = exc
            pub.close(0)
            context.term()
            return
        finally:
            self._ready.set()
        seq = 0
        while (item := self._queue.get()) is not None:
            topic, events, ts = item
            try:
                pub.send_multipart([topic, seq.to_bytes(8, "big"), encode_batch(events, ts)])
            except zmq.ZMQError:
                log.exception("KV events: a batch could not be sent")
            seq += 1
        pub.close()
        context.term()
