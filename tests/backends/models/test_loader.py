"""Loading checks that need no model: the intra-op threads, the session overlay."""

from __future__ import annotations

import pytest

from backends.errors import StartupError
from backends.models.loader import check_threads, session_overlay, usable_cpus

pytestmark = pytest.mark.unit


def test_threads_default_to_every_usable_cpu_and_may_be_fewer() -> None:
    assert check_threads(None) == usable_cpus()
    assert check_threads(1) == 1


def test_more_threads_than_cpus_are_refused() -> None:
    # The fuzz tier's find: 2,555 threads took minutes to load (a request timed out).
    with pytest.raises(StartupError, match="GENAI_INTRA_OP_THREADS=2555"):
        check_threads(2555)


def test_a_media_models_sessions_run_without_the_cpu_arena() -> None:
    """onnxruntime's CPU arena keeps what the largest request needed: a vision, embedding or
    speech stage runs once per image or clip, and the decoder's longest prefill (eight
    images' tokens) holds its attention scores, so a model with media stages goes without;
    a text model's decoder keeps it (issue 37)."""
    from backends.models.providers import ProviderChoice

    cpu = ProviderChoice("cpu", "test")
    stages = {"decoder": {}, "vision": {}, "embedding": {}, "type": "qwen2_5_vl"}
    overlay = session_overlay(2, cpu, stages)
    assert overlay is not None
    model = overlay["model"]
    assert model["decoder"] == {
        "session_options": {"intra_op_num_threads": 2, "enable_cpu_mem_arena": False}
    }
    for stage in ("vision", "embedding"):
        assert model[stage] == {"session_options": {"enable_cpu_mem_arena": False}}
    assert set(model) == {"decoder", "vision", "embedding"}
    text_only = session_overlay(2, cpu, {"decoder": {}})
    assert text_only == {"model": {"decoder": {"session_options": {"intra_op_num_threads": 2}}}}
    assert session_overlay(2, ProviderChoice("cuda", "test"), stages) is None
