"""Which variant of an ONNX Runtime model package to serve, chosen as onnxruntime's selector
chooses it:

for the execution provider in use, a variant's ``ep`` must be that provider's onnxruntime name
and its ``device`` one of the provider's hardware kinds; its compatibility string is scored by
the provider itself (optimal 100, prefer recompilation 50, not applicable 0, unsupported: out),
plus 10 for naming the provider; a variant with no ``ep``, ``device`` or string fits any
provider at 0; the highest score wins, declaration order breaks ties.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from backends.models.package_manifest import Package, Variant, fail

# Our device names -> onnxruntime's execution provider names (what a variant's "ep" says).
EP_NAMES = {
    "cpu": "CPUExecutionProvider",
    "cuda": "CUDAExecutionProvider",
    "directml": "DmlExecutionProvider",
    "coreml": "CoreMLExecutionProvider",
    "webgpu": "WebGpuExecutionProvider",
    "openvino": "OpenVINOExecutionProvider",
    "qnn": "QNNExecutionProvider",
}

# What an execution provider says of a compatibility string, and the score onnxruntime gives it
# (None: the variant is out).
SCORES: dict[str, int | None] = {
    "optimal": 100,
    "prefer_recompilation": 50,
    "not_applicable": 0,
    "unsupported": None,
}
NAMED_EP_BONUS = 10


@dataclass(frozen=True)
class EpTarget:
    """The execution provider a variant is chosen for: its onnxruntime name, the kinds of
    hardware it has here (``cpu``, ``gpu``, ``npu``; empty: not known, any fits), and how it
    judges a compatibility string for some of those kinds (one of :data:`SCORES`' keys)."""

    provider: str  # our name (GENAI_DEVICE): cpu, cuda, ...
    ep_name: str
    devices: tuple[str, ...] = ()
    judge: Callable[[str, tuple[str, ...]], str] = lambda _string, _devices: "not_applicable"


def _score(variant: Variant, target: EpTarget) -> int | None:
    """onnxruntime's score of ``variant`` for ``target``; None: it does not run there."""
    if variant.unconstrained:
        return 0
    if variant.ep and variant.ep != target.ep_name:
        return None
    devices = target.devices
    if variant.device and devices:
        if variant.device not in devices:
            return None
        devices = (variant.device,)
    verdict = (
        target.judge(variant.compatibility, devices) if variant.compatibility else "not_applicable"
    )
    score = SCORES.get(verdict, 0)
    if score is None:
        return None
    return score + (NAMED_EP_BONUS if variant.ep else 0)


def select_variant(
    package: Package, target: EpTarget, pin: str | None = None
) -> tuple[Variant, str]:
    """The variant to serve on ``target`` and why; a :class:`StartupError` listing the
    variants when none runs there. ``pin`` (GENAI_MODEL_VARIANT) names one; it must still
    run there."""
    scored = [(v, _score(v, target)) for v in package.variants]
    usable = [(v, s) for v, s in scored if s is not None]
    where = f"the {target.provider} execution provider ({target.ep_name})"
    if pin:
        named = [(v, s) for v, s in scored if v.name == pin.strip().strip("/")]
        if not named:
            raise fail(
                package.root,
                f"GENAI_MODEL_VARIANT={pin} names none of its variants: {package.listing()}",
            )
        variant, score = named[0]
        if score is None:
            raise fail(
                package.root,
                f"its variant {variant.describe()} does not run on {where}; it has: "
                f"{package.listing()}",
            )
        return variant, f"pinned by GENAI_MODEL_VARIANT={pin}"
    if not usable:
        raise fail(
            package.root,
            f"no variant for {where}; it has: {package.listing()}. Set GENAI_DEVICE to a "
            "provider it has a variant for",
        )
    best, score = max(usable, key=lambda pair: pair[1])  # max keeps the first of equals
    why = f"score {score} on {where}"
    others = [v.describe() for v in package.variants if v is not best]
    if others:
        why += f"; also there: {'; '.join(others)}"
    return best, why


def machine_target(provider: str) -> EpTarget:
    """``provider`` as onnxruntime sees it on this machine: its hardware kinds, and its own
    judgement of compatibility strings (onnxruntime's ``get_model_compatibility_for_ep_devices``,
    the callback its selector calls). Not applicable where onnxruntime cannot say."""
    ep_name = EP_NAMES.get(provider, provider)
    try:
        import onnxruntime
        from onnxruntime.capi import _pybind_state as capi

        ep_devices = [d for d in onnxruntime.get_ep_devices() if d.ep_name == ep_name]
    except Exception:  # no onnxruntime, or one without the device API: nothing to ask
        return EpTarget(provider, ep_name)

    def kind(device: Any) -> str:
        return str(getattr(device.device.type, "name", device.device.type)).lower()

    def judge(string: str, kinds: tuple[str, ...]) -> str:
        chosen = [d for d in ep_devices if not kinds or kind(d) in kinds]
        try:
            verdict = capi.get_model_compatibility_for_ep_devices(chosen, string)
        except Exception:  # onnxruntime's selector counts a failed check as not applicable
            return "not_applicable"
        name = str(getattr(verdict, "name", verdict)).lower().removeprefix("ep_")
        return name.removeprefix("supported_") if name.startswith("supported_") else name

    return EpTarget(provider, ep_name, tuple(dict.fromkeys(kind(d) for d in ep_devices)), judge)
