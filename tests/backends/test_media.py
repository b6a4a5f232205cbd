"""Image decoding's limits: every image over the pixel cap is a 413 with the cap, whatever its
size and format (Pillow's decompression-bomb guard is set from the cap, so it never speaks
for itself)."""

from __future__ import annotations

import io
import struct
import zlib

import pytest
from PIL import Image

from backends.errors import InvalidRequest, PayloadTooLarge
from backends.media import ImageLimits, decode_image

pytestmark = pytest.mark.unit

CAP = 1_000


def image(fmt: str, width: int, height: int) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (width, height), (10, 200, 30)).save(out, format=fmt)
    return out.getvalue()


def png_header(width: int, height: int) -> bytes:
    """A PNG that claims ``width`` x ``height`` pixels and holds none (a bomb's header)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return (
            struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
        )

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IEND", b"")


@pytest.mark.parametrize("fmt", ["PNG", "TIFF", "GIF", "BMP", "WEBP", "JPEG"])
@pytest.mark.parametrize("side", [32, 40, 100, 1000])  # the cap is 1,000 pixels: 31 x 31 fits
def test_every_image_over_the_cap_is_a_413_with_the_cap(fmt: str, side: int) -> None:
    with pytest.raises(PayloadTooLarge) as caught:
        decode_image(image(fmt, side, side), "messages.0.content.1", ImageLimits(max_pixels=CAP))
    assert caught.value.status_code == 413 and caught.value.param == "messages.0.content.1"
    assert f"at most {CAP} pixels" in caught.value.message


@pytest.mark.parametrize("side", [9_500, 20_000, 40_000])
def test_a_bomb_past_pillows_own_guard_is_a_413_with_the_cap(side: int) -> None:
    """Pillow's default guard (89.5 Mpx) would have answered "not an image" past it."""
    with pytest.raises(PayloadTooLarge, match="at most 25000000 pixels"):
        decode_image(png_header(side, side), "image", ImageLimits())


def test_an_image_within_the_cap_decodes_and_garbage_is_a_400() -> None:
    got = decode_image(image("PNG", 31, 31), "image", ImageLimits(max_pixels=CAP))
    assert (got.width, got.height) == (31, 31)
    with pytest.raises(InvalidRequest) as caught:
        decode_image(b"not an image at all", "image", ImageLimits(max_pixels=CAP))
    assert caught.value.status_code == 400 and "not an image" in caught.value.message
