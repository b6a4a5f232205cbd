"""scripts/container_probe.py's judgement of a refusal: the admin routes, off by default, answer
403 ``admin_disabled`` in the error shape, which proves the route is there; any other 403 or a
404 does not."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.unit

# Loaded from its file, as it runs (a standalone script under any python3, not a package module).
_spec = importlib.util.spec_from_file_location(
    "container_probe", Path(__file__).resolve().parents[2] / "scripts" / "container_probe.py"
)
assert _spec is not None and _spec.loader is not None
probe: Any = importlib.util.module_from_spec(_spec)
sys.modules["container_probe"] = probe  # its dataclasses look their module up
_spec.loader.exec_module(probe)
admin_off = probe.admin_off


def reply(status: int, error: object) -> Any:
    return probe.Reply(status, "application/json", json.dumps({"error": error}).encode())


def test_the_admin_routes_refusal_while_off_is_an_answer() -> None:
    off = {"message": "The admin routes are off", "type": "permission_error", "param": None}
    assert admin_off(reply(403, {**off, "code": "admin_disabled"}))


@pytest.mark.parametrize(
    "status, error",
    [
        (403, {"message": "wrong key", "type": "permission_error", "code": "invalid_api_key"}),
        (404, {"message": "not found", "type": "not_found_error", "code": "admin_disabled"}),
        (403, "admin_disabled"),
    ],
)
def test_other_refusals_are_not(status: int, error: object) -> None:
    assert not admin_off(reply(status, error))
