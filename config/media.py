"""Media from clients: audio uploads, and images (where they may be fetched from, how large
they may be). Groups of :class:`config.server.ServerSettings`."""

from __future__ import annotations

from pydantic_settings import BaseSettings

from config.fields import SETTINGS_CONFIG, setting


class AudioSettings(BaseSettings):
    """Audio uploads (/v1/audio/transcriptions)."""

    model_config = SETTINGS_CONFIG

    max_audio_mib: float = setting(
        25.0,
        "GENAI_MAX_AUDIO_MIB",
        "max_audio_mib",
        "Largest audio upload for /v1/audio/transcriptions, in MiB (413 beyond; the request "
        "body limit GENAI_MAX_BODY_MIB applies first).",
        gt=0,
    )
    max_audio_seconds: float = setting(
        600.0,
        "GENAI_MAX_AUDIO_SECONDS",
        "max_audio_seconds",
        "Longest audio a transcription accepts, in seconds (400 beyond).",
        gt=0,
    )


class ImageSettings(BaseSettings):
    """Images from clients: where they may be fetched from, and how large they may be."""

    model_config = SETTINGS_CONFIG

    image_url_hosts: str = setting(
        "",
        "GENAI_IMAGE_URL_HOSTS",
        "image_url_hosts",
        "Hosts whose http(s) image URLs the server fetches, comma-separated: a name or IP "
        "(exactly that host) or *.example.org (its subdomains). Empty: remote image URLs are "
        "refused (data: URLs always work). Loopback, private and link-local addresses are "
        "fetched only from a host named exactly.",
    )
    image_fetch_timeout: float = setting(
        10.0,
        "GENAI_IMAGE_FETCH_TIMEOUT",
        "image_fetch_timeout",
        "Seconds one image URL may take to fetch, redirects included.",
        gt=0,
    )
    image_fetch_redirects: int = setting(
        3,
        "GENAI_IMAGE_FETCH_REDIRECTS",
        "image_fetch_redirects",
        "Redirects followed when fetching an image URL (each checked like the first URL).",
        ge=0,
    )
    max_image_mib: float = setting(
        20.0,
        "GENAI_MAX_IMAGE_MIB",
        "max_image_mib",
        "Largest image accepted (as sent or fetched), in MiB; larger ones get 413.",
        gt=0,
    )
    max_image_pixels: int = setting(
        25_000_000,
        "GENAI_MAX_IMAGE_PIXELS",
        "max_image_pixels",
        "Most pixels (width x height) one image may decode to; more gets 413.",
        ge=1,
    )
    max_images: int = setting(
        8,
        "GENAI_MAX_IMAGES",
        "max_images",
        "Images one request may carry; more gets 413.",
        ge=1,
    )
