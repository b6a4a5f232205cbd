"""Images a client sent, checked and decoded before any model sees them.

A security boundary: the bytes come from anyone. Pillow reads the header first (format and
size: an image over the pixel cap, a decompression bomb, is a 413 before its pixels are
allocated, whatever its size: Pillow's own guard is set from the cap), then decodes the
whole image; only then does the model get it, re-encoded as a PNG of the decoded RGB pixels.
onnxruntime-genai's own decoder (onnxruntime-extensions) ends the whole process on some
malformed files (libjpeg's "Not a JPEG file" calls exit()), so it never sees the client's bytes.

CPU work: call :func:`decode_image` off the event loop (``asyncio.to_thread``).
"""

from __future__ import annotations

import hashlib
import io
import warnings
from dataclasses import dataclass

from backends.errors import InvalidRequest, PayloadTooLarge
from backends.types import ImageInput

# Formats Pillow decodes that a client may send (no PDF, EPS, or other formats that run code
# or external tools). The name is Pillow's ``Image.format``.
IMAGE_FORMATS = ("PNG", "JPEG", "WEBP", "GIF", "BMP", "TIFF")


@dataclass(frozen=True)
class ImageLimits:
    max_bytes: int = 20 * 1024 * 1024  # encoded size, as sent or fetched
    max_pixels: int = 25_000_000  # width x height, decoded
    max_images: int = 8  # per request


def decode_image(data: bytes, param: str, limits: ImageLimits) -> ImageInput:
    """The image in ``data``, checked against ``limits``; a 400 naming ``param`` when it is
    not an image Pillow can decode in an accepted format, a 413 when it is too large."""
    from PIL import Image, UnidentifiedImageError

    if len(data) > limits.max_bytes:
        raise PayloadTooLarge(
            f"{param}: the image is {len(data)} bytes; at most {limits.max_bytes} are accepted.",
            param=param,
        )
    if not data:
        raise InvalidRequest(f"{param}: the image is empty.", param=param)
    # Pillow's decompression-bomb guard, from our cap: it warns (an error here) past the cap
    # and raises past twice the cap, as the header is read and again for a later frame.
    Image.MAX_IMAGE_PIXELS = limits.max_pixels
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            with Image.open(io.BytesIO(data), formats=IMAGE_FORMATS) as img:
                width, height = img.size
                if width * height > limits.max_pixels:
                    raise PayloadTooLarge(
                        f"{param}: the image is {width}x{height} pixels; at most "
                        f"{limits.max_pixels} pixels are accepted.",
                        param=param,
                    )
                if width < 1 or height < 1:
                    raise InvalidRequest(f"{param}: the image has no pixels.", param=param)
                img.seek(0)  # an animation: its first frame
                rgb = img.convert("RGB")
    except (Image.DecompressionBombError, Image.DecompressionBombWarning):
        raise PayloadTooLarge(
            f"{param}: the image has more than {limits.max_pixels} pixels (width x height); "
            f"at most {limits.max_pixels} pixels are accepted.",
            param=param,
        ) from None
    except UnidentifiedImageError:
        raise InvalidRequest(
            f"{param}: the data is not an image in a supported format "
            f"({', '.join(f.lower() for f in IMAGE_FORMATS)}).",
            param=param,
        ) from None
    except (OSError, ValueError, SyntaxError, EOFError) as exc:  # truncated or corrupt
        raise InvalidRequest(
            f"{param}: the image cannot be decoded ({exc}).", param=param
        ) from None
    out = io.BytesIO()
    rgb.save(out, format="PNG", compress_level=1)
    return ImageInput(
        data=out.getvalue(),
        digest=hashlib.sha256(data).hexdigest(),
        param=param,
        width=width,
        height=height,
        source_bytes=len(data),
    )
