"""A request's images are decoded one at a time: its memory holds one decoding at once, not
GENAI_MAX_IMAGES of them."""

from __future__ import annotations

import asyncio
import io
import threading
import time

import pytest
from PIL import Image

from backends.core.request import GenerationRequest
from backends.media import ImageLimits, decode_image
from backends.types import ChatPrompt, ImageInput, ImageSource
from routes.door import media
from routes.door.media import MediaPolicy, with_images

pytestmark = pytest.mark.unit


def png() -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (8, 8), (10, 200, 30)).save(out, format="PNG")
    return out.getvalue()


def test_a_requests_images_are_decoded_one_at_a_time(monkeypatch: pytest.MonkeyPatch) -> None:
    running, most = 0, 0
    lock = threading.Lock()

    def slow_decode(data: bytes, param: str, limits: ImageLimits) -> ImageInput:
        nonlocal running, most
        with lock:
            running += 1
            most = max(most, running)
        time.sleep(0.05)
        with lock:
            running -= 1
        return decode_image(data, param, limits)

    monkeypatch.setattr(media, "decode_image", slow_decode)
    sources = [ImageSource(f"images.{i}", data=png()) for i in range(4)]
    request = GenerationRequest(ChatPrompt([{"role": "user", "content": "x"}], images=sources))
    loaded = asyncio.run(with_images(request, MediaPolicy()))
    assert loaded.chat is not None and len(loaded.chat.images) == 4 and most == 1
