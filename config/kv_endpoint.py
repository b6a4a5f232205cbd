"""GENAI_KV_EVENTS_ENDPOINT, read once at start: which ZMQ socket the KV-event publisher opens,
and whether it binds or connects.

- ``tcp://*:PORT`` binds the server's own address: ``POD_IP`` where it is set, else ``HOST``
  (the events carry every tenant's prompt tokens: they stay where the HTTP side listens);
- ``tcp://0.0.0.0:PORT`` or ``tcp://[::]:PORT`` binds every interface (the operator says so);
- ``ipc://PATH`` binds a Unix socket;
- ``tcp://HOST:PORT``, any other host, connects: to a subscriber that binds (the router's
  central one).

Refused, each with one line: another transport (``inproc://`` reaches only this process), a
port outside 1-65535 (``0`` or ``*`` would bind a random port no picker can know), a host that
does not resolve, and a host that is this pod's own address (that connects where a bind was
meant).
"""

from __future__ import annotations

import ipaddress
import socket
from dataclasses import dataclass

EVERY_INTERFACE = ("0.0.0.0", "[::]")
IPC_PATH_MAX = 107  # bytes in a Unix socket's path (sun_path, less its NUL)


@dataclass(frozen=True)
class Endpoint:
    """A parsed endpoint: ``host`` is ``*``, an address or a name (``[...]`` for IPv6), or
    empty for ipc; ``port`` is 0 for ipc."""

    transport: str
    host: str
    port: int
    path: str = ""

    @property
    def binds(self) -> bool:
        return self.transport == "ipc" or self.host == "*" or self.host in EVERY_INTERFACE


@dataclass(frozen=True)
class KVEventsSocket:
    """What the publisher opens: ``address`` as ZMQ takes it, bound or connected to."""

    address: str
    bind: bool


def parse_endpoint(endpoint: str) -> Endpoint:
    """``endpoint`` parsed and checked, resolving a host it connects to; a ValueError that
    says what is wrong otherwise."""
    transport, sep, rest = endpoint.partition("://")
    if not sep or transport not in ("tcp", "ipc"):
        hint = " (it reaches only this process)" if transport == "inproc" else ""
        raise ValueError(f"must be tcp://HOST:PORT or ipc://PATH, not {endpoint!r}{hint}")
    if transport == "ipc":
        if not rest or rest == "*":
            raise ValueError("ipc:// needs a path")
        if len(rest.encode()) > IPC_PATH_MAX:
            raise ValueError(f"the ipc:// path is longer than {IPC_PATH_MAX} bytes")
        return Endpoint("ipc", "", 0, rest)
    host, colon, port_text = rest.rpartition(":")
    if not colon or not host:
        raise ValueError(f"must be tcp://HOST:PORT, not {endpoint!r}")
    if not port_text.isdigit() or not 1 <= int(port_text) <= 65535:
        raise ValueError(
            f"port {port_text!r} in {endpoint}: give one from 1 to 65535 (0 or * would bind a "
            "random port the subscribers cannot know)"
        )
    if ":" in host and not (host.startswith("[") and host.endswith("]")):
        raise ValueError(f"write an IPv6 host in brackets: tcp://[{host}]:{port_text}")
    parsed = Endpoint("tcp", host, int(port_text))
    if not parsed.binds:
        try:
            addresses(parsed)
        except (OSError, UnicodeError) as exc:
            reason = getattr(exc, "strerror", None) or exc
            raise ValueError(f"cannot resolve host {host!r} in {endpoint} ({reason})") from None
    return parsed


def addresses(endpoint: Endpoint) -> set[ipaddress.IPv4Address | ipaddress.IPv6Address]:
    """The addresses ``endpoint``'s host resolves to."""
    found = socket.getaddrinfo(endpoint.host.strip("[]"), endpoint.port, type=socket.SOCK_STREAM)
    return {ipaddress.ip_address(str(info[4][0]).split("%")[0]) for info in found}


def own_address(pod_ip: str, host: str) -> str:
    """Where ``tcp://*`` binds: POD_IP where it is set, else the HTTP host."""
    own = pod_ip or host
    return f"[{own}]" if ":" in own else own


def connects_to_self(endpoint: Endpoint, pod_ip: str) -> bool:
    """Whether ``endpoint`` connects to this pod's own IP (a bind was meant there)."""
    if endpoint.binds or not pod_ip:
        return False
    try:
        return ipaddress.ip_address(pod_ip) in addresses(endpoint)
    except (OSError, UnicodeError):
        return False


def kv_events_socket(endpoint: str, pod_ip: str, host: str) -> KVEventsSocket:
    """The socket ``endpoint`` asks for, ``*`` standing for this server's own address."""
    parsed = parse_endpoint(endpoint)
    if parsed.transport == "ipc":
        return KVEventsSocket(endpoint, bind=True)
    where = own_address(pod_ip, host) if parsed.host == "*" else parsed.host
    return KVEventsSocket(f"tcp://{where}:{parsed.port}", bind=parsed.binds)
