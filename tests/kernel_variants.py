"""The suite on more than one CPU kind, from one machine: ways to make this machine's logits
differ from its own, as another CPU kind's do.

- :func:`other_kernels`: a copy of a model folder whose ``genai_config.json`` asks onnxruntime
  for its fp32-activation int4 kernels (the session option ``mlas.qnbit.force_fp32``) instead of
  the int8-activation ones that the builder's accuracy level 4 selects: a real other kernel
  path, which both og.Generator and the batch scheduler take. Its logits differ from the
  default path's by about 0.1 on the demo model (docs/development.md).
- :data:`NOISE`: ``GENAI_LOGIT_NOISE`` at the documented difference between CPU kinds' int4
  kernels (up to about 1.2 between the logits of two paths): every gap between two tokens moves
  by up to that much, at random (seeded).
"""

from __future__ import annotations

import json
from pathlib import Path

NOISE = 1.2
KERNEL_OPTION = "mlas.qnbit.force_fp32"


def other_kernels(folder: Path, into: Path) -> Path:
    """``folder``'s files linked into ``into``, with the decoder's session options asking for
    the other int4 kernels."""
    into.mkdir(parents=True, exist_ok=True)
    for item in folder.iterdir():
        if item.name != "genai_config.json":
            (into / item.name).symlink_to(item.resolve())
    config = json.loads((folder / "genai_config.json").read_text())
    options = config["model"]["decoder"].setdefault("session_options", {})
    options[KERNEL_OPTION] = "1"
    (into / "genai_config.json").write_text(json.dumps(config, indent=4))
    return into
