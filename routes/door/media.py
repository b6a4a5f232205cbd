"""A request's images, loaded before it is submitted: inline bytes (``data:`` URLs, base64
blocks) decoded, http(s) URLs fetched where the operator allows it, each checked and decoded
(:mod:`backends.media`) off the event loop.

Fetching is a security boundary (the URL is the client's, the network is the server's):
- off unless ``GENAI_IMAGE_URL_HOSTS`` names the host (a name or IP exactly, or ``*.domain``);
- the host's addresses are resolved and checked, and the connection goes to a checked address
  (the name is kept for the Host header and TLS): no loopback, private, link-local or other
  special address unless the allow-list names the host exactly;
- byte, time and redirect limits; each redirect is checked like the first URL;
- only http and https (``file:`` and the rest are refused);
- never for a caller without a key on a route opened to such callers (the render routes under
  GENAI_RENDER_OPEN): it gets inline images only, and one answer for any URL, so that it can
  neither make the server fetch nor learn what stands on the allowed hosts.
Every failure is a 400 (or a 413 for a size) naming the part.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import dataclasses
import ipaddress
import socket
import ssl
from dataclasses import dataclass
from urllib.parse import unquote_to_bytes, urljoin, urlsplit

import httpx
from fastapi import Request

from backends.core.request import GenerationRequest
from backends.errors import InvalidRequest, PayloadTooLarge
from backends.media import ImageLimits, decode_image
from backends.types import ChatPrompt, ImageInput, ImageSource
from config.settings import ServerSettings, split_csv
from routes.http.auth import anonymous
from routes.http.deps import get_models, get_settings

Address = ipaddress.IPv4Address | ipaddress.IPv6Address


@dataclass(frozen=True)
class FetchPolicy:
    hosts: tuple[str, ...] = ()  # "example.org" (exactly), "*.example.org" (subdomains)
    timeout: float = 10.0
    redirects: int = 3
    verify: ssl.SSLContext | bool = True  # TLS verification (the system's CAs)


@dataclass(frozen=True)
class MediaPolicy:
    limits: ImageLimits = ImageLimits()
    fetch: FetchPolicy = FetchPolicy()
    inline_only: bool = False  # a caller without a key: data: URLs and base64 alone


def media_policy(settings: ServerSettings) -> MediaPolicy:
    return MediaPolicy(
        ImageLimits(
            max_bytes=int(settings.max_image_mib * 1024 * 1024),
            max_pixels=settings.max_image_pixels,
            max_images=settings.max_images,
        ),
        FetchPolicy(
            tuple(h.lower() for h in split_csv(settings.image_url_hosts)),
            settings.image_fetch_timeout,
            settings.image_fetch_redirects,
        ),
    )


async def load_media(http: Request, request: GenerationRequest) -> GenerationRequest:
    """``request`` with its images loaded under the server's settings, once its model is
    known to read images."""
    chat = request.chat
    if chat is None or not chat.images:
        return request
    get_models(http).generator(request.model).check_media(request)
    server = get_settings(http).server
    policy = media_policy(server)
    if anonymous(http, server):
        policy = dataclasses.replace(policy, fetch=FetchPolicy(), inline_only=True)
    return await with_images(request, policy)


async def with_images(request: GenerationRequest, policy: MediaPolicy) -> GenerationRequest:
    """``request`` with its chat's image sources loaded (unchanged when it has none)."""
    chat = request.chat
    if chat is None or not chat.images:
        return request
    if len(chat.images) > policy.limits.max_images:
        raise PayloadTooLarge(
            f"The request has {len(chat.images)} images; at most {policy.limits.max_images} "
            "are accepted.",
            param=chat.images[policy.limits.max_images].param,
        )
    # One at a time: a request holds one image's decoding memory at once, not max_images'.
    images = [await load_image(s, policy) for s in chat.images]
    prompt: ChatPrompt = dataclasses.replace(chat, images=images)
    return dataclasses.replace(request, prompt=prompt)


async def load_image(source: ImageInput | ImageSource, policy: MediaPolicy) -> ImageInput:
    if isinstance(source, ImageInput):
        return source
    data = source.data
    if data is None and source.b64 is not None:
        data = base64_bytes(source.b64, source.param, policy.limits.max_bytes)
    if data is None:
        data = await image_bytes(source.url or "", source.param, policy)
    return await asyncio.to_thread(decode_image, data, source.param, policy.limits)


async def image_bytes(url: str, param: str, policy: MediaPolicy) -> bytes:
    scheme = url.split(":", 1)[0].lower() if ":" in url else ""
    if scheme == "data":
        return data_url_bytes(url, param, policy.limits.max_bytes)
    if scheme in ("http", "https") and policy.inline_only:
        raise InvalidRequest(
            f"{param}: without an API key, images are taken inline only (data: URLs).",
            param=param,
        )
    if scheme in ("http", "https"):
        return await fetch(url, param, policy)
    raise InvalidRequest(
        f"{param}: the image URL must be a data: URL or an http(s) URL"
        + (f", not {scheme}:." if scheme else "."),
        param=param,
    )


def data_url_bytes(url: str, param: str, max_bytes: int) -> bytes:
    """The bytes of ``data:[<type>][;base64],<data>``; an image type, base64 or percent-encoded."""
    header, sep, payload = url[5:].partition(",")
    if not sep:
        raise InvalidRequest(f"{param}: the data: URL has no comma before its data.", param=param)
    fields = [f.strip().lower() for f in header.split(";")]
    media_type = fields[0]
    if media_type and not media_type.startswith("image/"):
        raise InvalidRequest(
            f"{param}: the data: URL's type is {media_type!r}, not an image type.", param=param
        )
    if len(payload) * 3 // 4 > max_bytes:
        raise PayloadTooLarge(
            f"{param}: the image is larger than the {max_bytes} bytes accepted.", param=param
        )
    if "base64" not in fields[1:]:
        return unquote_to_bytes(payload)
    try:
        return base64.b64decode("".join(payload.split()), validate=True)
    except (binascii.Error, ValueError):
        raise InvalidRequest(f"{param}: the data: URL is not valid base64.", param=param) from None


def base64_bytes(data: str, param: str, max_bytes: int) -> bytes:
    """A base64 image (Ollama's ``images``)."""
    if len(data) * 3 // 4 > max_bytes:
        raise PayloadTooLarge(
            f"{param}: the image is larger than the {max_bytes} bytes accepted.", param=param
        )
    try:
        return base64.b64decode("".join(data.split()), validate=True)
    except (binascii.Error, ValueError):
        raise InvalidRequest(f"{param}: the image data is not valid base64.", param=param) from None


# ---- fetching ---------------------------------------------------------------------------------
def host_allowed(host: str, hosts: tuple[str, ...]) -> tuple[bool, bool]:
    """(allowed at all, named exactly): only an exact name may reach a special address."""
    host = host.lower().rstrip(".")
    if host in hosts:
        return True, True
    for entry in hosts:
        if entry.startswith("*.") and host.endswith(entry[1:]):
            return True, False
    return False, False


def special(address: Address) -> bool:
    """Loopback, private, link-local, multicast, reserved or unspecified: not the internet."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return not address.is_global or address.is_multicast


async def resolve(host: str, port: int, param: str) -> list[Address]:
    try:
        return [ipaddress.ip_address(host)]
    except ValueError:
        pass
    loop = asyncio.get_running_loop()
    try:
        infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError:
        raise InvalidRequest(
            f"{param}: the image URL's host {host!r} is not found.", param=param
        ) from None
    return [ipaddress.ip_address(str(info[4][0]).split("%")[0]) for info in infos]


async def checked_address(url: str, param: str, policy: FetchPolicy) -> tuple[str, Address]:
    """The URL's host, if allowed, and one of its addresses that may be reached."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise InvalidRequest(f"{param}: only http(s) image URLs are fetched.", param=param)
    host = parts.hostname
    allowed, exact = host_allowed(host, policy.hosts)
    if not allowed:
        why = "no remote image URLs are allowed" if not policy.hosts else "it is not allowed"
        raise InvalidRequest(
            f"{param}: the image URL's host {host!r} is not fetched ({why}: the server's "
            "GENAI_IMAGE_URL_HOSTS lists the hosts it fetches from); send the image as a "
            "data: URL instead.",
            param=param,
        )
    port = parts.port or (443 if parts.scheme == "https" else 80)
    addresses = await resolve(host, port, param)
    usable = [a for a in addresses if exact or not special(a)]
    if not usable:
        raise InvalidRequest(
            f"{param}: the image URL's host {host!r} resolves to a loopback, private or "
            "link-local address, which is fetched only from a host named exactly in "
            "GENAI_IMAGE_URL_HOSTS.",
            param=param,
        )
    return host, usable[0]


async def fetch(url: str, param: str, policy: MediaPolicy) -> bytes:
    fetch_policy, max_bytes = policy.fetch, policy.limits.max_bytes
    try:
        async with asyncio.timeout(fetch_policy.timeout):
            async with httpx.AsyncClient(
                follow_redirects=False, trust_env=False, verify=fetch_policy.verify
            ) as client:
                for _ in range(fetch_policy.redirects + 1):
                    host, address = await checked_address(url, param, fetch_policy)
                    response = await get(client, url, host, address, param, max_bytes)
                    if isinstance(response, bytes):
                        return response
                    url = urljoin(url, response)  # a redirect's Location
                raise InvalidRequest(
                    f"{param}: the image URL redirected more than {fetch_policy.redirects} times.",
                    param=param,
                )
    except TimeoutError:
        raise InvalidRequest(
            f"{param}: the image URL was not fetched within {fetch_policy.timeout:g} s.",
            param=param,
        ) from None
    except httpx.HTTPError as exc:
        raise InvalidRequest(
            f"{param}: the image URL could not be fetched ({type(exc).__name__}).", param=param
        ) from None


async def get(
    client: httpx.AsyncClient, url: str, host: str, address: Address, param: str, max_bytes: int
) -> bytes | str:
    """One GET to ``address`` (Host and TLS name: ``host``): the body, or a redirect's
    Location."""
    parts = urlsplit(url)
    literal = f"[{address}]" if isinstance(address, ipaddress.IPv6Address) else str(address)
    netloc = f"{literal}:{parts.port}" if parts.port else literal
    target = parts._replace(netloc=netloc).geturl()
    headers = {"Host": parts.netloc.rsplit("@", 1)[-1], "Accept": "image/*"}
    request = client.build_request("GET", target, headers=headers)
    if parts.scheme == "https":
        request.extensions["sni_hostname"] = host
    response = await client.send(request, stream=True)
    try:
        if response.is_redirect:
            location = str(response.headers.get("location") or "")
            if not location:
                raise InvalidRequest(f"{param}: a redirect without a Location.", param=param)
            return location
        if response.status_code != 200:
            raise InvalidRequest(
                f"{param}: fetching the image URL got HTTP {response.status_code}.", param=param
            )
        declared = response.headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > max_bytes:
            raise PayloadTooLarge(
                f"{param}: the image is {declared} bytes; at most {max_bytes} are accepted.",
                param=param,
            )
        body = bytearray()
        async for chunk in response.aiter_bytes():
            body += chunk
            if len(body) > max_bytes:
                raise PayloadTooLarge(
                    f"{param}: the image is larger than the {max_bytes} bytes accepted.",
                    param=param,
                )
        return bytes(body)
    finally:
        await response.aclose()
