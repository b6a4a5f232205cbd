"""ONNX Runtime model packages (``NAME.ortpackage/``): the variant chosen as onnxruntime's selector
chooses it (with fake providers), manifests read and refused in one line, and a package built
from the demo model (tests/model_packages.py) served for real, answering token for token as
the plain demo folder does; a package with nothing for this machine refused at start (exit 2)
and through the admin route (400)."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

from backends.config import Limits, ModelConfig, ServiceConfig
from backends.core.request import ChatPrompt, GenerationRequest
from backends.core.service import InferenceService
from backends.errors import StartupError
from backends.models.folder import inspect_model_folder
from backends.models.package import lay_out
from backends.models.package_manifest import Package, Variant, is_model_package, read_package
from backends.models.package_select import EpTarget, select_variant
from backends.types import SamplingParams
from config.settings import DEMO_MODEL_DIR, REPO_ROOT
from tests.conftest import DirectGenerator, assert_error, make_client, wait_ready
from tests.model_packages import (
    CUDA_ONLY,
    build_package,
    directory_hash,
    edit_variant_config,
    read_manifest,
    write_manifest,
)

MESSAGES = [{"role": "user", "content": "Tell me about the river."}]
N = 16

# -- choosing a variant (unit: fake providers, no files) ----------------------------------------

CPU = EpTarget("cpu", "CPUExecutionProvider", ("cpu",))
CUDA = EpTarget("cuda", "CUDAExecutionProvider", ("gpu",))


def package(*variants: Variant) -> Package:
    return Package(Path("/p/m.ortpackage"), "model", variants, {})


def v(
    name: str, ep: str | None = None, device: str | None = None, compat: str | None = None
) -> Variant:
    return Variant(name, Path("/p/m.ortpackage") / name, ep, device, compat)


def judge_by(verdicts: dict[str, str]) -> EpTarget:
    """A provider that judges compatibility strings from a table (unknown: not applicable),
    as an EP's ValidateCompiledModelCompatibilityInfo does."""
    return EpTarget(
        "openvino",
        "OpenVINOExecutionProvider",
        ("npu", "cpu"),
        lambda string, _devices: verdicts.get(string, "not_applicable"),
    )


@pytest.mark.unit
def test_the_variant_for_the_provider_in_use_wins() -> None:
    pkg = package(v("cuda", "CUDAExecutionProvider", "gpu"), v("cpu", "CPUExecutionProvider"))
    assert select_variant(pkg, CPU)[0].name == "cpu"
    assert select_variant(pkg, CUDA)[0].name == "cuda"


@pytest.mark.unit
def test_a_named_provider_outscores_a_variant_for_any() -> None:
    """onnxruntime: an unconstrained variant scores 0, naming the EP adds 10."""
    pkg = package(v("any"), v("cpu", "CPUExecutionProvider"))
    chosen, why = select_variant(pkg, CPU)
    assert chosen.name == "cpu" and "score 10" in why
    assert select_variant(package(v("any")), CUDA)[0].name == "any"


@pytest.mark.unit
def test_compatibility_strings_are_scored_by_the_provider() -> None:
    ov = "OpenVINOExecutionProvider"
    pkg = package(v("old", ov, "npu", "npu-v1"), v("new", ov, "npu", "npu-v2"))
    target = judge_by({"npu-v1": "prefer_recompilation", "npu-v2": "optimal"})
    chosen, why = select_variant(pkg, target)
    assert chosen.name == "new" and "score 110" in why
    # An unsupported string takes its variant out; with none left, a refusal that lists them.
    assert select_variant(pkg, judge_by({"npu-v2": "unsupported"}))[0].name == "old"
    with pytest.raises(StartupError, match="no variant for the openvino") as err:
        select_variant(pkg, judge_by({"npu-v1": "unsupported", "npu-v2": "unsupported"}))
    assert "old (OpenVINOExecutionProvider, npu, compatibility 'npu-v1')" in str(err.value)


@pytest.mark.unit
def test_the_device_must_be_one_the_provider_has() -> None:
    ov = "OpenVINOExecutionProvider"
    pkg = package(v("gpu", ov, "gpu"), v("npu", ov, "npu"))
    assert select_variant(pkg, judge_by({}))[0].name == "npu"
    # A provider whose hardware onnxruntime does not list takes any device.
    assert select_variant(pkg, EpTarget("openvino", ov))[0].name == "gpu"


@pytest.mark.unit
def test_equal_scores_go_to_the_first_declared() -> None:
    pkg = package(v("b", "CPUExecutionProvider"), v("a", "CPUExecutionProvider"))
    assert select_variant(pkg, CPU)[0].name == "b"


@pytest.mark.unit
def test_no_variant_for_this_provider_is_one_line_listing_the_variants() -> None:
    pkg = package(v("cuda", "CUDAExecutionProvider", "gpu"), v("dml", "DmlExecutionProvider"))
    with pytest.raises(StartupError) as err:
        select_variant(pkg, CPU)
    message = str(err.value)
    assert "\n" not in message
    assert "no variant for the cpu execution provider (CPUExecutionProvider)" in message
    assert "cuda (CUDAExecutionProvider, gpu); dml (DmlExecutionProvider)" in message
    assert "GENAI_DEVICE" in message


@pytest.mark.unit
def test_a_pin_names_a_variant_that_must_run_here() -> None:
    pkg = package(v("cpu-a", "CPUExecutionProvider"), v("cpu-b", "CPUExecutionProvider"))
    assert select_variant(pkg, CPU, "cpu-b")[0].name == "cpu-b"
    with pytest.raises(StartupError, match="GENAI_MODEL_VARIANT=nope names none"):
        select_variant(pkg, CPU, "nope")
    with pytest.raises(StartupError, match="does not run on the cuda"):
        select_variant(pkg, CUDA, "cpu-a")


# -- reading a manifest (unit: small files in tmp_path, no model) ------------------------------


def manifest_package(tmp_path: Path, manifest: object, *folders: str) -> Path:
    root = tmp_path / "m.ortpackage"
    root.mkdir()
    for folder in folders:
        (root / folder).mkdir(parents=True)
    (root / "manifest.json").write_text(json.dumps(manifest))
    return root


def refusal(root: Path) -> str:
    with pytest.raises(StartupError) as err:
        read_package(root)
    message = str(err.value)
    assert "\n" not in message and message.startswith(f"Model package {root}: ")
    return message


def one(variants: Mapping[str, object], **extra: object) -> dict[str, object]:
    return {"schema_version": "1.0", "components": {"model": {"variants": variants}}, **extra}


@pytest.mark.unit
def test_a_package_is_a_manifest_without_a_genai_config(tmp_path: Path) -> None:
    root = manifest_package(tmp_path, one({"cpu": {}}), "cpu")
    assert is_model_package(root)
    (root / "genai_config.json").write_text("{}")  # og: a flat folder with a manifest.json
    assert not is_model_package(root)


@pytest.mark.unit
def test_variants_read_in_declaration_order_with_their_folders(tmp_path: Path) -> None:
    variants = {"z": {"ep": "CPUExecutionProvider"}, "a": {"variant_directory": "builds/a"}}
    root = manifest_package(tmp_path, one(variants), "z", "builds/a")
    pkg = read_package(root)
    assert [x.name for x in pkg.variants] == ["z", "a"]
    assert pkg.variants[1].directory == root / "builds" / "a" and pkg.component == "model"


@pytest.mark.unit
def test_an_external_component_file(tmp_path: Path) -> None:
    manifest = {"schema_version": 1, "components": {"decoder": "decoder"}}
    root = manifest_package(tmp_path, manifest, "decoder/cpu")
    body = {"variants": {"cpu": {"ep": "CPUExecutionProvider"}}}
    (root / "decoder" / "component.json").write_text(json.dumps(body))
    (variant,) = read_package(root).variants
    assert variant.directory == root / "decoder" / "cpu"


@pytest.mark.unit
@pytest.mark.parametrize(
    ("manifest", "needle"),
    [
        ({"components": {}}, "no schema_version"),
        ({"schema_version": "2.0", "components": {}}, "schema_version 2.0 is not one"),
        ({"schema_version": "1.0", "components": {}}, "declares no components"),
        (
            {"schema_version": "1.0", "components": {"a": {"variants": {}}, "b": {"variants": {}}}},
            "declares 2 components (a, b)",
        ),
        (one({}, extra=1), "unknown field 'extra'"),
        (one({"cpu": {"ep": 3}}), "variant 'cpu''s ep is not a string"),
        (one({"cpu": {"variant_directory": "../elsewhere"}}), "leaves the package"),
        (one({}, shared_assets={"sha256:abc": "x"}), "is not a sha256:<64 hex digits> URI"),
        ({"schema_version": "1.0", "components": {"model": "missing"}}, "missing"),
    ],
)
def test_manifest_errors_are_one_line(tmp_path: Path, manifest: object, needle: str) -> None:
    assert needle in refusal(manifest_package(tmp_path, manifest))


@pytest.mark.unit
def test_a_newer_minor_may_carry_fields_this_server_skips(tmp_path: Path) -> None:
    manifest = {**one({"cpu": {"ep": "CPUExecutionProvider", "new": 1}}), "schema_version": "1.7"}
    root = manifest_package(tmp_path, {**manifest, "newer_field": True}, "cpu")
    assert read_package(root).variants[0].ep == "CPUExecutionProvider"


@pytest.mark.unit
def test_a_manifest_that_is_not_json(tmp_path: Path) -> None:
    root = tmp_path / "m.ortpackage"
    root.mkdir()
    (root / "manifest.json").write_text("{not json")
    assert "its manifest manifest.json is not valid JSON" in refusal(root)


# -- a package built from the demo model --------------------------------------------------------


@pytest.fixture(autouse=True)
def cache_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Laid-out variants go to $XDG_CACHE_HOME: a temp folder here, not the user's cache."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    return tmp_path / "xdg"


@pytest.fixture()
def demo_package(tmp_path: Path) -> Path:
    return build_package(tmp_path / "demo.ortpackage", DEMO_MODEL_DIR)


def shared_asset(pkg: Path) -> Path:
    (asset,) = (pkg / "shared_assets").iterdir()
    return asset


@pytest.mark.unit
def test_the_test_package_names_its_tokenizer_by_onnxruntimes_directory_hash(
    demo_package: Path,
) -> None:
    asset = shared_asset(demo_package)
    assert asset.name == f"sha256-{directory_hash(asset)}"
    config = json.loads((demo_package / "cpu" / "genai_config.json").read_text())
    assert config["model"]["tokenizer_dir"] == asset.name.replace("-", ":", 1)
    assert not (demo_package / "cpu" / "tokenizer.json").exists()
    assert (demo_package / "cpu" / "model.onnx.data").is_symlink()  # nothing large copied


@pytest.mark.unit
def test_the_cpu_variant_is_laid_out_as_a_plain_folder_of_links(
    demo_package: Path, cache_home: Path
) -> None:
    folder = inspect_model_folder(demo_package, provider="cpu")
    assert folder.source == demo_package and folder.path.is_relative_to(cache_home)
    assert folder.origin.startswith("package variant cpu (score 10 on the cpu")
    assert (folder.path / "model.onnx.data").resolve() == (
        DEMO_MODEL_DIR / "model.onnx.data"
    ).resolve()
    assert (folder.path / "tokenizer.json").resolve().parent == shared_asset(demo_package)
    assert "tokenizer_dir" not in folder.config["model"]  # its files are beside the config
    assert folder.chat_templates  # read from the shared asset, as the plain folder's
    # Laid out once: a second start reuses the folder.
    assert inspect_model_folder(demo_package, provider="cpu").path == folder.path


@pytest.mark.unit
@pytest.mark.parametrize(
    ("tokenizer_dir", "needle"),
    [
        ("sha256:xyz", "'sha256:xyz' in variant 'cpu' is not a sha256:<64 lowercase hex"),
        ("sha256:" + "0" * 64, f"names the shared asset sha256:{'0' * 64}, which the package"),
        ("../outside", "leaves the package"),
    ],
)
def test_bad_shared_asset_references_are_one_line(
    demo_package: Path, tokenizer_dir: str, needle: str
) -> None:
    edit_variant_config(demo_package, "cpu", tokenizer_dir=tokenizer_dir)
    with pytest.raises(StartupError) as err:
        inspect_model_folder(demo_package, provider="cpu")
    assert needle in str(err.value) and "\n" not in str(err.value)


@pytest.mark.unit
def test_a_missing_file_is_one_line(demo_package: Path) -> None:
    pkg = read_package(demo_package)
    (demo_package / "cpu" / "model.onnx").unlink()
    with pytest.raises(StartupError, match="variant 'cpu' is missing its model file model.onnx"):
        lay_out(pkg, pkg.variants[0])
    (demo_package / "cpu" / "genai_config.json").unlink()
    with pytest.raises(StartupError, match="variant 'cpu''s cpu/genai_config.json is missing"):
        lay_out(pkg, pkg.variants[0])
    shutil.rmtree(demo_package / "cuda")
    with pytest.raises(StartupError, match="variant 'cuda''s folder cuda is missing"):
        lay_out(pkg, pkg.variants[1])


@pytest.mark.unit
def test_a_manifest_override_moves_a_shared_asset(demo_package: Path) -> None:
    asset = shared_asset(demo_package)
    moved = demo_package / "tokenizers" / "demo"
    moved.parent.mkdir()
    asset.rename(moved)
    manifest = read_manifest(demo_package)
    manifest["shared_assets"] = {asset.name.replace("-", ":", 1): "tokenizers/demo"}
    write_manifest(demo_package, manifest)
    folder = inspect_model_folder(demo_package, provider="cpu")
    assert (folder.path / "tokenizer.json").resolve().parent == moved.resolve()


@pytest.mark.model
def test_the_package_answers_token_for_token_as_the_plain_folder(
    demo_package: Path, oracle: DirectGenerator
) -> None:
    """Token ids through the core, then the text over HTTP, against og.Generator on the demo
    folder itself."""
    prompt = oracle.chat_prompt(MESSAGES)
    expected_text, expected_ids = oracle.greedy(prompt, N)
    assert expected_ids and expected_text

    async def ids_of(folder: Path) -> list[int]:
        cfg = ModelConfig(folder, device="cpu", intra_op_threads=1)
        service = InferenceService(ServiceConfig(cfg, Limits()))
        await service.start()
        try:
            request = GenerationRequest(
                ChatPrompt(MESSAGES), SamplingParams(temperature=0.0), max_tokens=N
            )
            return [
                piece.token.token_id
                async for piece in await service.submit(request)
                if piece.token is not None
            ]
        finally:
            await service.stop()

    assert asyncio.run(ids_of(demo_package)) == expected_ids
    with make_client(model_dir=demo_package, device="cpu") as client:
        wait_ready(client)
        body = {"messages": MESSAGES, "max_tokens": N, "temperature": 0}
        data = client.post("/v1/chat/completions", json=body).json()
    assert data["choices"][0]["message"]["content"] == expected_text
    assert data["usage"]["completion_tokens"] == len(expected_ids)


@pytest.mark.model
def test_the_admin_route_loads_a_package_and_refuses_one_with_nothing_for_this_machine(
    tmp_path: Path, demo_package: Path
) -> None:
    cuda_only = build_package(tmp_path / "cuda-only.ortpackage", DEMO_MODEL_DIR, CUDA_ONLY)
    with make_client(admin=True, model_root=tmp_path, device="cpu") as client:
        wait_ready(client)
        bad = client.post("/admin/models", json={"name": "c", "path": str(cuda_only)})
        err = assert_error(bad, 400, "path")
        assert "no variant for the cpu execution provider" in err["message"]
        assert "it has: cuda (CUDAExecutionProvider, gpu)" in err["message"]
        good = client.post("/admin/models", json={"name": "pkg", "path": str(demo_package)})
        assert good.status_code == 200, good.text
        body = {"model": "pkg", "messages": MESSAGES, "max_tokens": 4, "temperature": 0}
        assert client.post("/v1/chat/completions", json=body).status_code == 200


@pytest.fixture()
def live_env(cache_home: Path) -> Iterator[dict[str, str]]:
    from bench.harness.server import clean_env

    yield clean_env(XDG_CACHE_HOME=str(cache_home), GENAI_DEVICE="cpu")


@pytest.mark.live
def test_a_package_with_nothing_for_this_machine_stops_the_start(
    tmp_path: Path, live_env: dict[str, str]
) -> None:
    cuda_only = build_package(tmp_path / "cuda-only.ortpackage", DEMO_MODEL_DIR, CUDA_ONLY)
    proc = subprocess.run(
        [sys.executable, "main_genai.py"],
        cwd=REPO_ROOT,
        env={**live_env, "GENAI_MODEL_DIR": str(cuda_only)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    lines = [line for line in proc.stderr.splitlines() if "no variant for" in line]
    assert len(lines) == 1, proc.stderr
    assert (
        "no variant for the cpu execution provider (CPUExecutionProvider); it has: cuda"
        in (lines[0])
    )
    assert os.fspath(cuda_only) in lines[0]
