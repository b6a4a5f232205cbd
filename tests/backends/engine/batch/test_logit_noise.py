"""GENAI_LOGIT_NOISE, the test helper that makes this machine's logits move as another CPU
kind's kernels move them: every logit by at most half the setting, the same draws in every run,
and nothing at all when it is 0; the setting reaches the batch scheduler's decoder."""

from __future__ import annotations

import numpy as np
import pytest

from backends.engine.batch.decoder import Decoder, read_spec, session_options
from backends.engine.batch.kv_cache import KVCache
from backends.models.folder import inspect_model_folder
from config.models_file import served_model_fields
from config.settings import DEMO_MODEL_DIR, Settings

pytestmark = pytest.mark.model


def logits(noise: float) -> np.ndarray:
    """The demo model's logits for one prompt, on a fresh decoder and cache."""
    import onnxruntime as ort

    folder = inspect_model_folder(DEMO_MODEL_DIR)
    session = ort.InferenceSession(
        str(DEMO_MODEL_DIR / "model.onnx"),
        session_options(ort, folder, 1),
        providers=["CPUExecutionProvider"],
    )
    spec = read_spec(folder, {i.name: i.type for i in session.get_inputs()})
    decoder, kv = Decoder(spec, session, ort, noise=noise), KVCache(spec, 1, 512, ort)
    ids = np.arange(3, 40, dtype=np.int64)[None, :]
    return decoder.run(ids, np.ones_like(ids), None, kv, (0, 1))


def test_each_logit_moves_by_at_most_half_the_setting_and_the_same_in_every_run() -> None:
    clean = logits(0.0)
    np.testing.assert_array_equal(logits(0.0), clean)  # off: this machine's own bits
    shifted = logits(1.2)
    moved = shifted - clean
    assert np.abs(moved).max() <= 0.6 + 1e-5
    assert np.abs(moved).max() > 0.5  # drawn over the whole range, not a token shift
    np.testing.assert_array_equal(logits(1.2), shifted)  # seeded: the same draws each run
    # A gap between two tokens moves by up to the setting (the two ends of the draw).
    gaps = np.abs(moved[0, -1, :, None] - moved[0, -1, None, :])
    assert 1.0 < gaps.max() <= 1.2 + 1e-5


def test_the_setting_reaches_the_batch_decoder() -> None:
    from backends.config import ModelConfig
    from backends.engine.batch.build import create_batch
    from backends.models.loader import load_model

    [fields] = served_model_fields(Settings.load(logit_noise=1.2))
    assert fields["logit_noise"] == 1.2
    model = load_model(ModelConfig(DEMO_MODEL_DIR, intra_op_threads=1))
    batch = create_batch(model, slots=1, kv_budget_mib=1, store_mib=0, logit_noise=1.2)
    try:
        assert batch.decoder._noise == 1.2
    finally:
        batch.close()
