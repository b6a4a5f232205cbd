"""onnxruntime-genai's KV-cache calibration (``kv_cache_calibration``, same arguments), made to
run on sliding-window models too. Run as a script: ``python modelkit/kv_calibration.py --model
DIR/model.onnx --tokenizer HF_DIR --out scales.json``.

The calibration feeds each sequence with an empty past (length 0). onnxruntime refuses that on
a layer with a sliding-window cache ("KV cache capacity (0) must be at least
local_window_size"). Here the empty past is a zero buffer as long as the sequence instead: the
attention op reads the past's length from the attention mask (still 0), and the present then
holds every position, as the calibration expects. On a full-attention model the scales are the
same either way.
"""

from __future__ import annotations

from typing import Any


def _widen_empty_pasts(feeds: dict[str, Any]) -> dict[str, Any]:
    import numpy as np

    length = feeds["input_ids"].shape[-1]
    out = dict(feeds)
    for name, value in feeds.items():
        if name.startswith("past_key_values.") and value.ndim == 4 and value.shape[2] == 0:
            batch, heads, _, head_size = value.shape
            out[name] = np.zeros((batch, heads, length, head_size), value.dtype)
    return out


def main() -> None:
    import onnxruntime as ort
    from onnxruntime_genai.models.quantization import kv_cache_calibration

    class Session(ort.InferenceSession):  # type: ignore[misc]
        def run(self, output_names: Any, input_feed: Any, run_options: Any = None) -> Any:
            return super().run(output_names, _widen_empty_pasts(input_feed), run_options)

    ort.InferenceSession = Session  # the calibration makes its session through this name
    kv_cache_calibration._main()


if __name__ == "__main__":
    main()
