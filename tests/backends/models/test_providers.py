from __future__ import annotations

import pytest

from backends.errors import StartupError
from backends.models.providers import apply_provider, select_provider

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("available", "expected"),
    [
        ({"cpu"}, "cpu"),
        ({"cpu", "cuda"}, "cuda"),
        ({"cpu", "directml"}, "directml"),
        ({"cpu", "coreml"}, "coreml"),
        ({"cpu", "cuda", "directml", "coreml"}, "cuda"),
        ({"cpu", "directml", "coreml"}, "directml"),
        ({"cpu", "webgpu"}, "cpu"),  # auto only tries the documented order
        (set(), "cpu"),  # CPU is always there
    ],
)
def test_auto_picks_the_first_available_in_order(available, expected) -> None:
    choice = select_provider("auto", available)
    assert choice.name == expected
    assert "auto" in choice.reason


def test_auto_reason_names_what_was_skipped() -> None:
    assert "cuda, directml not available" in select_provider("auto", {"coreml"}).reason


@pytest.mark.parametrize("name", ["cpu", "cuda", "directml", "webgpu", "openvino", "qnn"])
def test_explicit_available_provider_is_used(name) -> None:
    assert select_provider(name, {name, "cpu"}).name == name


@pytest.mark.parametrize(
    ("name", "package"),
    [("cuda", "onnxruntime-genai-cuda"), ("directml", "onnxruntime-genai-directml")],
)
def test_explicit_unavailable_provider_fails_naming_the_package(name, package) -> None:
    with pytest.raises(StartupError) as exc:
        select_provider(name, {"cpu"})
    assert package in str(exc.value)
    assert f"pip install {package}" in str(exc.value)


def test_unknown_provider_is_refused() -> None:
    with pytest.raises(StartupError, match="Unknown device"):
        select_provider("tpu", {"cpu"})


class RecordingConfig:
    def __init__(self) -> None:
        self.calls: list[tuple[str, ...]] = []

    def clear_providers(self) -> None:
        self.calls.append(("clear",))

    def append_provider(self, name: str) -> None:
        self.calls.append(("append", name))


@pytest.mark.parametrize(
    ("name", "calls"),
    [
        ("cpu", [("clear",)]),
        ("cuda", [("clear",), ("append", "cuda")]),
        ("directml", [("clear",), ("append", "DML")]),
        ("coreml", [("clear",), ("append", "CoreML")]),
    ],
)
def test_apply_provider_uses_og_config_names(name, calls) -> None:
    cfg = RecordingConfig()
    apply_provider(cfg, select_provider(name, {name}))
    assert cfg.calls == calls


def test_og_accepts_the_provider_names_we_use(demo_model_dir) -> None:
    """The real og.Config must know every name we append (it says 'not available' vs 'unknown')."""
    og = pytest.importorskip("onnxruntime_genai")
    from backends.models.providers import PROVIDERS

    for spec in PROVIDERS.values():
        if spec.og_name is None:
            continue
        cfg = og.Config(str(demo_model_dir))
        cfg.clear_providers()
        cfg.append_provider(spec.og_name)
        try:
            og.Model(cfg)
        except Exception as exc:  # no GPU here: loading fails, but not for an unknown name
            assert "Unknown provider name" not in str(exc), spec
