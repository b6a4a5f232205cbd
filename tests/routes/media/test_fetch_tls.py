"""An https image URL is fetched from the checked address with the URL's name as the TLS
server name: the certificate is verified against the name, not the address."""

from __future__ import annotations

import asyncio
import datetime
import ssl
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from backends.errors import InvalidRequest
from config.settings import REPO_ROOT
from routes.door.media import FetchPolicy, MediaPolicy, fetch

pytestmark = pytest.mark.unit

PNG = (REPO_ROOT / "tests" / "hub_models" / "qwen2.5-vl" / "images" / "square.png").read_bytes()


def certificates(tmp: Path, name: str) -> tuple[Path, Path, Path]:
    """A CA, and a server certificate for ``name`` signed by it: (ca, cert, key) PEM files."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = datetime.datetime.now(datetime.UTC)
    ca_key, key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "test CA")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(1)
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(2)
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(name)]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    files = tmp / "ca.pem", tmp / "cert.pem", tmp / "key.pem"
    files[0].write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    files[1].write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    files[2].write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return files


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args: Any) -> None:
        pass

    def do_GET(self) -> None:  # noqa: N802
        self.send_response(200)
        self.send_header("Content-Length", str(len(PNG)))
        self.end_headers()
        self.wfile.write(PNG)


@pytest.fixture
def https(tmp_path: Path) -> Iterator[tuple[int, ssl.SSLContext]]:
    ca, cert, key = certificates(tmp_path, "img.test")
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.server_address[1], ssl.create_default_context(cafile=str(ca))
    server.shutdown()


def get(url: str, hosts: tuple[str, ...], trust: ssl.SSLContext) -> bytes:
    async def main() -> bytes:
        async def resolve(host: str, port: int, **kw: Any) -> list[Any]:
            return [(2, 1, 6, "", ("127.0.0.1", port))]  # every name: the test server

        asyncio.get_running_loop().getaddrinfo = resolve  # type: ignore[method-assign,assignment]
        policy = MediaPolicy(fetch=FetchPolicy(hosts, timeout=10, verify=trust))
        return await fetch(url, "image", policy)

    return asyncio.run(main())


def test_the_certificate_is_checked_against_the_urls_name(
    https: tuple[int, ssl.SSLContext],
) -> None:
    port, trust = https
    assert get(f"https://img.test:{port}/a.png", ("img.test",), trust) == PNG


def test_a_certificate_for_another_name_is_refused(https: tuple[int, ssl.SSLContext]) -> None:
    port, trust = https
    with pytest.raises(InvalidRequest, match="could not be fetched"):
        get(f"https://other.test:{port}/a.png", ("other.test",), trust)
