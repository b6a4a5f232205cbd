"""The core speaks its own field names: no protocol's wire-only field name appears in
``backends/``, as an identifier or inside a string. Each door maps the core's names to its own
(routes/door/fields.py, in_process/text_generator.py)."""

from __future__ import annotations

import importlib
import inspect
import io
import pkgutil
import re
import tokenize

import pytest
from pydantic import BaseModel

import schemas
from config.settings import REPO_ROOT

pytestmark = pytest.mark.unit

# Fields that only a protocol has (OpenAI's, the Responses API's, Anthropic's, Ollama's): each
# is a field of a wire schema, and the core has its own name for what it means, or no use for it.
WIRE_ONLY = (
    "response_format",
    "use_beam_search",
    "best_of",
    "max_completion_tokens",
    "max_output_tokens",
    "chat_template_kwargs",
    "stream_options",
    "include_usage",
    "encoding_format",
    "system_fingerprint",
    "reasoning_effort",
    "previous_response_id",
    "stop_sequences",
    "input_schema",
    "budget_tokens",
    "disable_parallel_tool_use",
    "output_config",
    "num_predict",
    "num_ctx",
    "keep_alive",
    "repeat_penalty",
    "repeat_last_n",
    "typical_p",
    "tfs_z",
    "mirostat",
)
NOT_WIRE = {"settings", "cli", "models_file", "ops", "errors"}  # schemas/ that are no protocol


def wire_fields() -> set[str]:
    """Every field name (and alias) of the protocols' request and response models."""
    names: set[str] = set()
    for info in pkgutil.walk_packages(schemas.__path__, "schemas."):
        if info.name.split(".")[1] in NOT_WIRE:
            continue
        module = importlib.import_module(info.name)
        for _, model in inspect.getmembers(module, inspect.isclass):
            if issubclass(model, BaseModel) and model.__module__ == info.name:
                for name, field in model.model_fields.items():
                    names |= {name, field.alias} if field.alias else {name}
    return names


def names_in(source: str, words: tuple[str, ...]) -> set[str]:
    """The ``words`` that ``source`` uses as an identifier or inside a string literal."""
    pattern = re.compile(r"\b(" + "|".join(map(re.escape, words)) + r")\b")
    found: set[str] = set()
    kinds = {tokenize.NAME, tokenize.STRING, getattr(tokenize, "FSTRING_MIDDLE", tokenize.STRING)}
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type in kinds:
            found.update(pattern.findall(token.string))
    return found


def test_the_list_is_made_of_wire_fields() -> None:
    assert not set(WIRE_ONLY) - wire_fields()


def test_the_scan_finds_a_name_as_identifier_or_string_but_not_in_a_comment() -> None:
    source = 'best_of = 1\nx = f"{y}: response_format"\n# use_beam_search\n'
    assert names_in(source, WIRE_ONLY) == {"best_of", "response_format"}


def test_no_wire_only_field_name_under_backends() -> None:
    found = {
        str(path.relative_to(REPO_ROOT)): sorted(names_in(path.read_text(), WIRE_ONLY))
        for path in sorted((REPO_ROOT / "backends").rglob("*.py"))
    }
    assert not {path: names for path, names in found.items() if names}
