"""The command line, derived from the settings' fields: one flag per setting.

``--model-dir DIR`` sets ``model_dir`` (env ``GENAI_MODEL_DIR``); flags override the environment
and ``.env``. Values are validated by the settings models, like the environment's.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal, get_args, get_origin

from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings

from config.settings import PARTS, REPO_ROOT, ModelSettings, env_name

DESCRIPTION = (
    "Serve an onnxruntime-genai model folder over HTTP: the native API (/v1/chat, "
    "/v1/chat/stream, /generate) and an OpenAI-compatible one (/v1/chat/completions, "
    "/v1/completions, /v1/models)."
)
EPILOG = (
    "Every setting can also be given as an environment variable (named in brackets) or in a "
    ".env file in the working directory. Flags override both."
)


def _choices(annotation: Any) -> tuple[str, ...]:
    if get_origin(annotation) is Literal:
        return tuple(str(a) for a in get_args(annotation))
    return ()


def _default(field: FieldInfo) -> str:
    value = field.get_default(call_default_factory=True)
    if isinstance(value, Path) and value.is_relative_to(REPO_ROOT):
        return str(value.relative_to(REPO_ROOT))  # the embedded demo model
    return "unset" if value is None or value == "" else str(value)


def _add(group: argparse._ArgumentGroup, name: str, field: FieldInfo) -> None:
    flag = "--" + name.replace("_", "-")
    help_text = f"{field.description} [{env_name(field)}; default: {_default(field)}]"
    if field.annotation is bool:
        group.add_argument(flag, dest=name, action=argparse.BooleanOptionalAction, help=help_text)
        return
    choices = _choices(field.annotation)
    metavar = "{" + ",".join(choices) + "}" if choices else name.upper()
    group.add_argument(flag, dest=name, metavar=metavar, help=help_text)


def build_parser(prog: str = "main_genai.py") -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=prog,
        description=DESCRIPTION,
        epilog=EPILOG,
        argument_default=argparse.SUPPRESS,  # an absent flag leaves env / .env / default
    )
    titles: dict[type[BaseSettings], str] = {ModelSettings: "model settings"}
    for part in PARTS:
        group = parser.add_argument_group(titles.get(part, "server settings"))
        for name, field in part.model_fields.items():
            _add(group, name, field)
    return parser


def parse_args(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """The settings given on the command line, by field name (``--help`` exits here)."""
    return vars(build_parser().parse_args(argv))
