"""``python -m modelkit.vision --out FOLDER [--check]``: build the tiny Qwen2.5-VL test model
(modelkit/vision/model.py says what it is), or check it against its record."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from modelkit import cli
from modelkit.builder import run_builder
from modelkit.expected import read_expected, write_expected
from modelkit.vision import model
from modelkit.vision.model import CHAT_TEMPLATE, make_hf_folder, make_images
from modelkit.vision.oracle import check_og, oracle
from modelkit.vision.stages import export_stages, write_genai_config


def build(out: Path, seed: int, init_range: float) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        hf_dir = Path(tmp) / "hf"
        make_hf_folder(hf_dir, seed, init_range)
        out.mkdir(parents=True, exist_ok=True)
        run_builder(
            hf_dir, out, "fp32", ["exclude_embeds=true"], cache_dir=Path(tmp) / "cache", quiet=True
        )
        export_stages(hf_dir, out)
        write_genai_config(hf_dir, out)
        (out / "chat_template.jinja").write_text(CHAT_TEMPLATE)
        (out / "images").mkdir(exist_ok=True)
        make_images(out / "images")
        expected = oracle(hf_dir, out / "images")
        write_expected(out, expected)
        if os.environ.get("KEEP_HF_DIR"):
            shutil.copytree(hf_dir, out / "hf", dirs_exist_ok=True)
        for leftover in ("model.onnx.data",):
            if (out / leftover).exists() and (out / leftover).stat().st_size == 0:
                (out / leftover).unlink()
    problems = check_og(out, expected)
    if problems:
        raise SystemExit("og differs from HF:\n" + "\n".join(problems))
    print(f"built {out}: og.Generator matches HF generate() on {len(expected['cases'])} cases")  # type: ignore[arg-type]


def check(out: Path) -> int:
    problems = check_og(out, read_expected(out))
    print("\n".join(problems) or "og matches expected.json")
    return 1 if problems else 0


def main() -> None:
    ap = cli.parser(model.__doc__, "only compare og with the recorded oracle")
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--init-range", type=float, default=0.2)
    args = ap.parse_args()
    cli.build_or_check(args, lambda: build(args.out, args.seed, args.init_range), check)


if __name__ == "__main__":
    main()
