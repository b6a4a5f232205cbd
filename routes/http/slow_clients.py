"""A deadline for each request's headers, which uvicorn does not have.

uvicorn times out idle keep-alive connections, but not a client that sends its headers a byte
at a time: 400 such connections stayed open for good and, at 1,024 open files, locked every
other client out. This is uvicorn's own HTTP protocol (httptools or h11, whichever it picks)
with one addition: from the moment a connection opens, or its previous response ends, the
client has ``header_timeout`` seconds to complete a request's headers, or the connection is
closed. The body has the same time again (``routes/http/body_limit.py``), and
``GENAI_MAX_CONNECTIONS`` bounds the open connections (uvicorn's ``limit_concurrency``).
"""

from __future__ import annotations

import asyncio
from typing import Any

from uvicorn.protocols.http.auto import AutoHTTPProtocol


class TimedHTTPProtocol(AutoHTTPProtocol):  # type: ignore[misc,valid-type]
    # Set by the launcher; a worker process started by uvicorn reads it from the settings.
    header_timeout: float | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:
        super().connection_made(transport)
        self._header_deadline: asyncio.TimerHandle | None = None
        self._arm()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self.cycle is not None and not self.cycle.response_complete:
            self._disarm()  # the headers are in; the request is being served

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing():
            self._arm()  # the next request's headers

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def _arm(self) -> None:
        self._disarm()
        self._header_deadline = self.loop.call_later(_timeout(), self._too_slow)

    def _disarm(self) -> None:
        if self._header_deadline is not None:
            self._header_deadline.cancel()
            self._header_deadline = None

    def _too_slow(self) -> None:
        self._header_deadline = None
        if self.cycle is None or self.cycle.response_complete:
            self.transport.close()


def _timeout() -> float:
    if TimedHTTPProtocol.header_timeout is None:
        from config.settings import ServerSettings

        TimedHTTPProtocol.header_timeout = ServerSettings().client_timeout
    return TimedHTTPProtocol.header_timeout


def server_options(client_timeout: float, max_connections: int) -> dict[str, Any]:
    """uvicorn options for the protections above."""
    TimedHTTPProtocol.header_timeout = client_timeout
    return {"http": TimedHTTPProtocol, "limit_concurrency": max_connections}
