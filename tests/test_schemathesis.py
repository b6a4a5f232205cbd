"""The fuzz tier: schemathesis over the server's whole /openapi.json, against a live server
without an API key, and one with a key (requests with it and without it), up to 100 generated
requests (valid and not) per operation: zero 5xx, and every response as the schema declares it
(status code, content type, body). Every generated string may carry hostile text: lone
surrogates, NULs, overlong-looking escapes and mixed normalisation forms.

Part of the live tier (it starts servers) and marked ``fuzz``: ``pytest -m fuzz`` runs it
alone, ``-m "not fuzz"`` leaves it out. The cases are derandomized, so a failure replays."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from bench.harness.server import ServerProcess, live_server
from config.settings import DEMO_MODEL_DIR, REPO_ROOT

pytestmark = [pytest.mark.live, pytest.mark.fuzz]

HUB = REPO_ROOT / "tests" / "hub_models"

KEY = "schemathesis-key"
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
]
EXAMPLES = 100  # per operation and server
# Generation is bounded by length, not by time: a fuzzed max_tokens/min_tokens can ask for the
# whole context, and a 5 s time limit answered such a request with the 504 it is documented to
# give on a machine kept busy by a CPU hog (issue 17's runs), whereas GENAI_MAX_LENGTH turns
# anything longer into a 400 before it starts. The time limit stays as a net, far above what
# 1,024 tokens of the demo model take.
ENV = {"GENAI_MAX_LENGTH": "1024", "GENAI_REQUEST_TIMEOUT": "60", "GENAI_DEFAULT_MAX_TOKENS": "16"}


# Text that is not what it seems, put into the generated requests' strings (issue 37): lone
# surrogates (a JSON "\\ud800" escape; no tokenizer encodes one), NULs (onnxruntime-genai's
# tokenizer reads a C string), an overlong NUL's bytes read as Latin-1 (the nearest a JSON
# escape comes to an overlong sequence; raw overlong bytes are the hostile suite's), and the
# same letters in mixed normalisation forms (NFC, NFD, a compatibility ligature, a sign that
# NFC turns into a letter).
UNICODE_PIECES = ["\x00", "a\x00b", "\u00c0\u0080", "\u00e0\u0080\u00af", "Cafe\u0301 Caf\u00e9"]
UNICODE_PIECES += ["\ufb01ne \u212b \u00c5", "\ufeff", "\U0010ffff"]
LONE_SURROGATES = ["\ud800", "\udfff", "x\udbff", "\udc00\ud800"]


def with_hostile_text(value: Any, pieces: list[str]) -> st.SearchStrategy[Any]:
    """``value`` unchanged (two cases in three), or with one of its strings (at any depth)
    given one of ``pieces``: replaced by it, or with it inserted."""
    paths: list[tuple[Any, ...]] = []

    def walk(node: Any, path: tuple[Any, ...]) -> None:
        if isinstance(node, str):
            paths.append(path)
        elif isinstance(node, dict):
            for key, item in node.items():
                walk(item, (*path, key))
        elif isinstance(node, list):
            for i, item in enumerate(node):
                walk(item, (*path, i))

    walk(value, ())
    if not paths:
        return st.just(value)

    def changed(path: tuple[Any, ...], piece: str, at: float, replace: bool) -> Any:
        def rebuilt(node: Any, rest: tuple[Any, ...]) -> Any:
            if not rest:
                cut = int(at * len(node))
                return piece if replace else node[:cut] + piece + node[cut:]
            copy = dict(node) if isinstance(node, dict) else list(node)
            copy[rest[0]] = rebuilt(node[rest[0]], rest[1:])
            return copy

        return rebuilt(value, path)

    mutated = st.builds(
        changed,
        st.sampled_from(paths),
        st.sampled_from(pieces),
        st.floats(0, 1),
        st.booleans(),
    )
    return st.sampled_from([False, False, True]).flatmap(
        lambda mutate: mutated if mutate else st.just(value)
    )


def hostile_hooks(schema: Any) -> None:
    """Give every generated JSON body's strings hostile text, surrogates included; the form
    upload, the query and the path get the pieces an HTTP client can send (a lone surrogate
    has no UTF-8 bytes to put in a form or a URL)."""

    def flatmap_body(ctx: Any, body: Any) -> st.SearchStrategy[Any]:
        form = ctx.operation.path.startswith("/v1/audio")
        return with_hostile_text(body, UNICODE_PIECES + ([] if form else LONE_SURROGATES))

    def flatmap_query(ctx: Any, query: Any) -> st.SearchStrategy[Any]:
        return with_hostile_text(query, UNICODE_PIECES)

    def flatmap_path_parameters(ctx: Any, parameters: Any) -> st.SearchStrategy[Any]:
        return with_hostile_text(parameters, UNICODE_PIECES)

    for hook in (flatmap_body, flatmap_query, flatmap_path_parameters):
        schema.hooks.register_hook_with_name(hook, hook.__name__)


@pytest.fixture(scope="module")
def open_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """The demo model, and an embedder and a reranker: the encoder doors reach their core."""
    models = tmp_path_factory.mktemp("fuzz") / "models.toml"
    models.write_text(
        f'[[models]]\nname = "onnx-genai"\npath = "{DEMO_MODEL_DIR}"\n\n'
        f'[[models]]\nname = "embedder"\npath = "{HUB / "st-embedder"}"\n\n'
        f'[[models]]\nname = "reranker"\npath = "{HUB / "reranker"}"\n'
    )
    with live_server(env={**ENV, "GENAI_MODELS_FILE": str(models)}) as running:
        yield running


@pytest.fixture(scope="module")
def keyed_server() -> Iterator[ServerProcess]:
    with live_server(env={**ENV, "GENAI_API_KEY": KEY}) as running:
        yield running


# No key set; a key set and sent; a key set and not sent (every protected route's 401).
MODES = {"open": ("open_server", {}), "keyed": ("keyed_server", {"Authorization": f"Bearer {KEY}"})}
MODES["no_key"] = ("keyed_server", {})


@pytest.mark.parametrize("mode", MODES)
def test_the_api_keeps_its_contract(mode: str, request: pytest.FixtureRequest) -> None:
    fixture, headers = MODES[mode]
    running: ServerProcess = request.getfixturevalue(fixture)
    schema = schemathesis.openapi.from_url(f"{running.url}/openapi.json")
    hostile_hooks(schema)
    failures: list[str] = []
    operations = [result.ok() for result in schema.get_all_operations()]  # type: ignore[union-attr]
    assert len(operations) >= 12  # the schema was read (every door has routes)
    cases = 0
    began = time.perf_counter()

    for operation in operations:

        @given(case=operation.as_strategy())
        @settings(
            max_examples=EXAMPLES,
            deadline=None,
            suppress_health_check=list(HealthCheck),
            derandomize=True,
            database=None,
        )
        def check(case: schemathesis.Case) -> None:
            nonlocal cases
            cases += 1
            case.call_and_validate(base_url=running.url, headers=headers, checks=CHECKS, timeout=30)

        try:
            check()
        except Exception as exc:  # every operation is tried; all failures are reported
            # A flaky failure (state the replay did not meet) holds the first error inside.
            inner = "".join(f"\n  {e!r}"[:2000] for e in getattr(exc, "exceptions", ()))
            failures.append(f"{operation.label}: {exc}{inner}")
    elapsed = time.perf_counter() - began
    print(f"\nfuzz ({mode}): {cases} cases, {len(operations)} operations, {elapsed:.1f} s")
    assert not failures, "\n\n".join(failures)
    assert cases >= len(operations) * 10  # hypothesis ran (some schemas allow fewer cases)
