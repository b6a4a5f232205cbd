"""Execution-provider choice: a pure decision plus the one place that applies it."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from backends.errors import StartupError


@dataclass(frozen=True)
class ProviderSpec:
    name: str  # our settings value (GENAI_DEVICE)
    og_name: str | None  # name for og.Config.append_provider; None: CPU (no provider appended)
    package: str  # what to pip install to get it


PROVIDERS: dict[str, ProviderSpec] = {
    spec.name: spec
    for spec in (
        ProviderSpec("cuda", "cuda", "onnxruntime-genai-cuda"),
        ProviderSpec("directml", "DML", "onnxruntime-genai-directml"),
        ProviderSpec("coreml", "CoreML", "onnxruntime-genai (a macOS build with CoreML)"),
        ProviderSpec("webgpu", "WebGPU", "onnxruntime-genai-webgpu"),
        ProviderSpec("openvino", "OpenVINO", "onnxruntime-genai with the OpenVINO provider"),
        ProviderSpec("qnn", "QNN", "onnxruntime-genai-qnn"),
        ProviderSpec("cpu", None, "onnxruntime-genai"),
    )
}

# `auto` tries accelerators first; CPU is always there.
AUTO_ORDER = ("cuda", "directml", "coreml", "cpu")


@dataclass(frozen=True)
class ProviderChoice:
    name: str
    reason: str

    @property
    def spec(self) -> ProviderSpec:
        return PROVIDERS[self.name]


def select_provider(requested: str, available: Iterable[str]) -> ProviderChoice:
    """Decide the provider. Never falls back silently from an explicit request."""
    avail = set(available) | {"cpu"}
    if requested == "auto":
        skipped: list[str] = []
        for name in AUTO_ORDER:
            if name in avail:
                why = "auto: first available of " + ", ".join(AUTO_ORDER)
                if skipped:
                    why += f" ({', '.join(skipped)} not available)"
                return ProviderChoice(name, why)
            skipped.append(name)
    if requested not in PROVIDERS:
        raise StartupError(
            f"Unknown device {requested!r}. Choose one of: auto, {', '.join(PROVIDERS)}."
        )
    if requested not in avail:
        spec = PROVIDERS[requested]
        raise StartupError(
            f"GENAI_DEVICE={requested} was requested but the {requested} execution provider is "
            f"not available in the installed onnxruntime-genai. Install {spec.package} "
            f"(pip install {spec.package.split(' ')[0]}) or set GENAI_DEVICE=auto or cpu."
        )
    return ProviderChoice(requested, "requested explicitly")


def _probe(fn: Callable[[], bool]) -> bool:
    try:
        return bool(fn())
    except Exception:  # a probe that cannot even run means "not available"
        return False


def detect_available(og: Any) -> set[str]:
    """Providers the installed onnxruntime-genai (and onnxruntime) can use on this machine."""
    found = {"cpu"}
    probes = {
        "cuda": "is_cuda_available",
        "directml": "is_dml_available",
        "webgpu": "is_webgpu_available",
        "openvino": "is_openvino_available",
        "qnn": "is_qnn_available",
    }
    for name, attr in probes.items():
        fn = getattr(og, attr, None)
        if fn is not None and _probe(fn):
            found.add(name)
    try:
        import onnxruntime

        if "CoreMLExecutionProvider" in onnxruntime.get_available_providers():
            found.add("coreml")
    except Exception:
        pass
    return found


def apply_provider(config: Any, choice: ProviderChoice) -> None:
    """Point an ``og.Config`` at the chosen provider (CPU: no provider appended)."""
    config.clear_providers()
    if choice.spec.og_name is not None:
        config.append_provider(choice.spec.og_name)
