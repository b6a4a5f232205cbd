"""The fuzz tier: schemathesis over the server's whole /openapi.json, against a live server
without an API key, and one with a key (requests with it and without it), up to 100 generated
requests (valid and not) per operation: zero 5xx, and every response as the schema declares it
(status code, content type, body).

Part of the live tier (it starts servers) and marked ``fuzz``: ``pytest -m fuzz`` runs it
alone, ``-m "not fuzz"`` leaves it out. The cases are derandomized, so a failure replays."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from bench.server import ServerProcess, live_server

pytestmark = [pytest.mark.live, pytest.mark.fuzz]

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


@pytest.fixture(scope="module")
def open_server() -> Iterator[ServerProcess]:
    with live_server(env=ENV) as running:
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
