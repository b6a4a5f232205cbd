"""Which hosts and addresses an image URL may reach: the resolved address is checked, not only
the name (a public-looking name that resolves to a private address is refused)."""

from __future__ import annotations

import asyncio
import socket
from typing import Any

import pytest

from backends.errors import InvalidRequest
from routes.door.media import FetchPolicy, checked_address, host_allowed

pytestmark = pytest.mark.unit


def resolving_to(address: str) -> Any:
    async def fake(host: str, port: int, **kw: Any) -> list[Any]:
        return [(socket.AF_INET6 if ":" in address else socket.AF_INET, 1, 6, "", (address, port))]

    return fake


def check(url: str, hosts: tuple[str, ...], address: str) -> str:
    async def main() -> str:
        asyncio.get_running_loop().getaddrinfo = resolving_to(address)  # type: ignore[method-assign]
        _, chosen = await checked_address(url, "image", FetchPolicy(hosts))
        return str(chosen)

    return asyncio.run(main())


def test_host_matching() -> None:
    assert host_allowed("img.example.org", ("*.example.org",)) == (True, False)
    assert host_allowed("example.org", ("*.example.org",)) == (False, False)
    assert host_allowed("Example.ORG.", ("example.org",)) == (True, True)
    assert host_allowed("evilexample.org", ("*.example.org",)) == (False, False)


def test_a_public_address_of_an_allowed_domain_is_fetched() -> None:
    assert (
        check("https://img.example.org/a.png", ("*.example.org",), "93.184.216.34")
        == "93.184.216.34"
    )


@pytest.mark.parametrize(
    "address",
    [
        "127.0.0.1",
        "10.1.2.3",
        "192.168.0.7",
        "172.16.5.4",
        "169.254.169.254",
        "::1",
        "fe80::1",
        "fd00::1",
        "::ffff:127.0.0.1",
        "0.0.0.0",
        "100.64.0.1",
        "224.0.0.1",
    ],
)
def test_a_wildcard_name_resolving_to_a_special_address_is_refused(address: str) -> None:
    with pytest.raises(InvalidRequest, match="loopback, private or link-local"):
        check("http://img.example.org/a.png", ("*.example.org",), address)


def test_a_host_named_exactly_may_be_private() -> None:
    assert check("http://cams.internal/a.png", ("cams.internal",), "10.0.0.8") == "10.0.0.8"
    assert check("http://127.0.0.1:8080/a.png", ("127.0.0.1",), "127.0.0.1") == "127.0.0.1"


def test_nothing_is_fetched_without_an_allow_list() -> None:
    with pytest.raises(InvalidRequest, match="no remote image URLs are allowed"):
        check("https://example.org/a.png", (), "93.184.216.34")
