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
publishes): a publish is a put on a bounded queue, dropped (and counted) when it is full.
Where the socket goes (bind or connect, which address) the settings decide
(config/kv_endpoint.py).
"""

from __future__ import annotations

import contextlib
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
# The bounds on what the events may hold in memory (docs/deployment.md): messages kept for each
# subscriber (ZMQ's SNDHWM; vLLM keeps 100,000), and batches waiting for the publisher's thread.
SEND_HWM = 1000
QUEUE_SIZE = 1000


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


def host_address() -> str:
    """The address this host's name resolves to (the pod IP when POD_IP is not set)."""
    try:
        return socket.gethostbyname(socket.gethostname())
    except OSError:
        return "127.0.0.1"


class KVEventPublisher:
    """One PUB socket at ``address`` (bound, or connected to a subscriber that binds), fed by
    every model's sink through a queue of at most ``queue_size`` batches: a sink never blocks
    its engine, and a batch that finds the queue full is dropped and counted (``dropped``, by
    model). The socket keeps at most ``hwm`` messages for each subscriber (ZMQ's SNDHWM) and
    drops the rest for it: whatever the subscribers do, memory stays bounded.

    ``shown`` names the endpoint as the operator wrote it, in the log and in errors."""

    def __init__(
        self,
        address: str,
        bind: bool,
        topic_for: Callable[[str], str],
        *,
        shown: str | None = None,
        hwm: int = SEND_HWM,
        queue_size: int = QUEUE_SIZE,
    ) -> None:
        self.address, self.bind, self.topic_for = address, bind, topic_for
        self.shown = shown or address
        self._hwm = hwm
        self.queue_size = queue_size
        self._queue: queue.Queue[tuple[bytes, list[KVEvent], float] | None]
        self._queue = queue.Queue(maxsize=queue_size)
        self._dropped: dict[str, int] = {}
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name="kv-events", daemon=True)
        self._ready = threading.Event()
        self._error: Exception | None = None
        self.opened = ""  # the address as ZMQ opened it (a bound port 0 is the real port)

    @property
    def dropped(self) -> dict[str, int]:
        """Batches dropped because the queue was full, by model."""
        with self._lock:
            return dict(self._dropped)

    @property
    def queued(self) -> int:
        """Batches waiting for the publisher's thread."""
        return self._queue.qsize()

    def start(self, timeout: float = 10.0) -> None:
        """Open the socket (on the publisher's thread); a StartupError if it cannot be.
        Once started, starting again does nothing."""
        if self._thread.is_alive() or self._ready.is_set():
            return
        self._thread.start()
        self._ready.wait(timeout)
        verb = "bind" if self.bind else "connect"
        if self._error is not None:
            raise StartupError(
                f"GENAI_KV_EVENTS_ENDPOINT={self.shown}: cannot {verb} {self.address}: "
                f"{self._error}"
            )
        log.info(
            "KV events on %s (%s %s; at most %d messages per subscriber, %d batches queued)",
            self.shown,
            "bound to" if self.bind else "connected to",
            self.opened,
            self._hwm,
            self.queue_size,
        )

    def sink(self, model: str) -> KVEventSink:
        """Where ``model``'s engine sends its events: its topic on this socket."""
        topic = self.topic_for(model).encode()

        def publish(events: Sequence[KVEvent]) -> None:
            if not events:
                return
            try:
                self._queue.put_nowait((topic, list(events), time.time()))
            except queue.Full:
                with self._lock:
                    self._dropped[model] = self._dropped.get(model, 0) + 1

        return publish

    def close(self, timeout: float = 2.0) -> None:
        """Send what is queued (the models' last AllBlocksCleared), then close."""
        if self._thread.is_alive():
            with contextlib.suppress(queue.Full):
                self._queue.put(None, timeout=timeout)
            self._thread.join(timeout)

    def _run(self) -> None:
        context = zmq.Context()
        pub = context.socket(zmq.PUB)
        pub.setsockopt(zmq.SNDHWM, self._hwm)
        pub.setsockopt(zmq.LINGER, 1000)  # what is queued at close still goes, for 1 s
        if "[" in self.address:
            pub.setsockopt(zmq.IPV6, 1)
        try:
            (pub.bind if self.bind else pub.connect)(self.address)
            self.opened = pub.getsockopt_string(zmq.LAST_ENDPOINT)
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
                # Never blocks: past SNDHWM a PUB drops the message for that subscriber.
                pub.send_multipart([topic, seq.to_bytes(8, "big"), encode_batch(events, ts)])
            except zmq.ZMQError:
                log.exception("KV events: a batch could not be sent")
            seq += 1
        pub.close()
        context.term()
