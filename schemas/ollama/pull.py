"""Ollama's /api/pull and /api/delete: a model named as a Hugging Face hub repo
(``ORG/REPO[:VARIANT]`` or ``hf:ORG/REPO``), and the progress lines a pull streams."""

from __future__ import annotations

from pydantic import BaseModel, Field

from schemas.ollama.request import ModelNamed

NAME_CHARS = 256


class _Named(ModelNamed):
    """A model named as a hub repo, by ``model`` or ``name``."""

    model: str | None = Field(
        None,
        min_length=1,
        max_length=NAME_CHARS,
        description="A Hugging Face hub repo: `ORG/REPO`, `ORG/REPO:VARIANT` (a variant folder "
        "or ONNX file in it) or `hf:ORG/REPO`. It is served under this name, `hf:` left off.",
    )
    name: str | None = Field(
        None, min_length=1, max_length=NAME_CHARS, description="The older name of `model`."
    )


class PullRequest(_Named):
    insecure: bool = Field(False, description="Accepted; the hub is reached as HF_ENDPOINT says.")
    stream: bool = Field(True, description="Newline-delimited JSON progress; false: one object.")


class DeleteRequest(_Named):
    pass


class PullProgress(BaseModel):
    """One line of a pull: ``pulling manifest``, then ``pulling <digest>`` per file with its
    bytes, ``verifying sha256 digest``, ``writing manifest``, ``success``."""

    status: str
    digest: str | None = Field(
        None,
        description="The file's digest as the hub lists it: `sha1:` and its git blob id "
        "(`sha256:` where the listing gives an LFS file's sha256).",
    )
    total: int | None = Field(None, description="The file's size in bytes.")
    completed: int | None = Field(None, description="Its bytes in the cache so far.")


class DeleteResponse(BaseModel):
    status: str = "success"
