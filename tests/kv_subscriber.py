"""A KV-event subscriber for the tests: a ZMQ SUB socket read on its own thread, as the llm-d
router's subscriber reads it (a bound ZMQ socket attaches a new peer only while it is being
read), keeping every message's frames."""

from __future__ import annotations

import threading
import time

import zmq


class Subscriber:
    def __init__(self, endpoint: str, bind: bool, topic: bytes = b"kv@") -> None:
        self.context = zmq.Context()
        self.socket = self.context.socket(zmq.SUB)
        self.socket.setsockopt(zmq.SUBSCRIBE, topic)
        self.port = 0
        if bind:
            self.port = self.socket.bind_to_random_port(endpoint)
        else:
            self.socket.connect(endpoint)
        self.messages: list[list[bytes]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        while not self._stop.is_set():
            if self.socket.poll(20):
                self.messages.append(self.socket.recv_multipart())

    def wait_for(self, count: int, timeout: float = 5.0) -> list[list[bytes]]:
        """The messages, once there are ``count`` (or ``timeout`` s passed)."""
        end = time.monotonic() + timeout
        while len(self.messages) < count and time.monotonic() < end:
            time.sleep(0.02)
        return self.messages

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        self.socket.close(0)
        self.context.term()
