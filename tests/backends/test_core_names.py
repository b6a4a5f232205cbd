"""The core speaks its own field names: no protocol's wire-only field name appears in
``backends/``, as an identifier or inside a string. Each door maps the core's names to its own
(routes/door/fields.py, the encoder doors' serving modules, in_process/text_generator.py)."""

from __future__ import annotations

import ast
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
    "truncate_prompt_tokens",
    "documents",
    "top_n",
    "return_documents",
    "text_1",
    "text_2",
)
# Wire-only field names that are also plain words of the core (an ONNX graph's input, one input
# of a batch): prose and code may say them, but the core never names a field by them. A name
# a protocol shares with the core (query, dimensions, prompt) is the core's own: on neither list.
WIRE_WORDS = ("input",)
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


def fields_named(source: str, words: tuple[str, ...]) -> set[str]:
    """The ``words`` that ``source`` names a field by: a string that is just the word, passed
    as a call's argument or as its ``param`` (``Field("input")``, ``check_text(x, "input")``,
    ``param="input"``)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call):
            values = [*node.args, *(k.value for k in node.keywords if k.arg == "param")]
            found.update(
                v.value for v in values if isinstance(v, ast.Constant) and v.value in words
            )
    return found


def test_the_lists_are_made_of_wire_fields() -> None:
    assert not set(WIRE_ONLY + WIRE_WORDS) - wire_fields()


def test_the_scan_finds_a_name_as_identifier_or_string_but_not_in_a_comment() -> None:
    source = 'best_of = 1\nx = f"{y}: response_format"\n# use_beam_search\n'
    assert names_in(source, WIRE_ONLY) == {"best_of", "response_format"}


def test_a_word_is_found_where_it_names_a_field_but_not_in_prose() -> None:
    for named in (
        'Error("input is empty.", param="input")',
        'check_text(x, "input")',
        'Field("input")',
    ):
        assert fields_named(named, WIRE_WORDS) == {"input"}
    prose = 'x = {"input": graph.input}  # one input\nf(f"Input {i}", within="input")\n'
    assert fields_named(prose, WIRE_WORDS) == set()


def test_no_wire_only_field_name_under_backends() -> None:
    found = {
        str(path.relative_to(REPO_ROOT)): sorted(names_in(path.read_text(), WIRE_ONLY))
        for path in sorted((REPO_ROOT / "backends").rglob("*.py"))
    }
    assert not {path: names for path, names in found.items() if names}


def test_no_field_named_by_a_wire_word_under_backends() -> None:
    found = {
        str(path.relative_to(REPO_ROOT)): sorted(fields_named(path.read_text(), WIRE_WORDS))
        for path in sorted((REPO_ROOT / "backends").rglob("*.py"))
    }
    assert not {path: names for path, names in found.items() if names}
