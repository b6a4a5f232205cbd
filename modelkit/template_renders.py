"""Record how Hugging Face ``transformers`` renders one tool loop with each model family's
published chat template: the reference the server's own renderer is compared with, character
for character (tests/backends/chat/test_families.py).

Build time only (needs ``transformers``; no torch, no hub): each family's template and
special tokens come from tests/backends/chat/families/, the tokenizer is the demo model's
(a template renders text; the vocabulary plays no part), and the output is written to
tests/backends/chat/families/renders.json.

    python -m modelkit.template_renders
"""

from __future__ import annotations

import json
from pathlib import Path

import transformers
from transformers import PreTrainedTokenizerFast

ROOT = Path(__file__).resolve().parent.parent
FAMILIES = ROOT / "tests" / "backends" / "chat" / "families"
TOKENIZER = ROOT / "models" / "demo-llama" / "tokenizer.json"


def main() -> None:
    loop = json.loads((FAMILIES / "tool_loop.json").read_text(encoding="utf-8"))
    families = json.loads((FAMILIES / "families.json").read_text(encoding="utf-8"))["families"]
    renders: dict[str, str] = {}
    for name, family in families.items():
        template = (FAMILIES / "templates" / family["template"]).read_text(encoding="utf-8")
        tokenizer = PreTrainedTokenizerFast(tokenizer_file=str(TOKENIZER), **family["tokens"])
        renders[name] = tokenizer.apply_chat_template(
            loop["reference"],
            tools=loop["tools"],
            chat_template=template,
            add_generation_prompt=True,
            tokenize=False,
        )
    builtin = json.loads((FAMILIES / "builtin_loop.json").read_text(encoding="utf-8"))
    family = families[builtin["family"]]
    template = (FAMILIES / "templates" / family["template"]).read_text(encoding="utf-8")
    tokenizer = PreTrainedTokenizerFast(tokenizer_file=str(TOKENIZER), **family["tokens"])
    renders[builtin["family"] + "_builtin"] = tokenizer.apply_chat_template(
        builtin["reference"],
        chat_template=template,
        add_generation_prompt=True,
        tokenize=False,
        **builtin["template_args"],
    )
    out = {"transformers": transformers.__version__, "renders": renders}
    path = FAMILIES / "renders.json"
    path.write_text(json.dumps(out, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    print(f"{len(renders)} renders written to {path.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
