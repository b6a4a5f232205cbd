"""Pull by name: ``main_genai.py pull ORG/REPO[:VARIANT]`` and ``GENAI_MODEL_DIR=hf:ORG/REPO``,
against a hub served on 127.0.0.1 in the hub's HTTP layout (tests/hub_server.py): the real
``huggingface_hub`` client, pointed at it with ``HF_ENDPOINT``. No real hub is reached."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from backends.config import ModelConfig
from backends.errors import StartupError
from backends.models.hub import HubRef, NotCached, fetch, resolve
from backends.models.hub_plan import plan_files
from bench.harness.paths import ROOT
from bench.harness.server import clean_env, live_server
from config.models_file import read_models_file
from tests.conftest import make_client, wait_ready
from tests.hub_server import CPU_VARIANT, CUDA_VARIANT, LocalHub

VARIANTS = "test-org/demo-variants"
DATA = f"{VARIANTS}/{CPU_VARIANT}/model.onnx.data"


def cpu_model(source: str) -> ModelConfig:
    return ModelConfig(path=Path(f"hf:{source}"), device="cpu")


# -- pure logic


@pytest.mark.unit
@pytest.mark.parametrize(
    ("text", "repo", "variant"),
    [
        ("ORG/REPO", "ORG/REPO", None),
        ("ORG/REPO:cuda/cuda-fp16", "ORG/REPO", "cuda/cuda-fp16"),
        (" ORG/REPO:model_q4 ", "ORG/REPO", "model_q4"),
    ],
)
def test_hub_ref_parses(text: str, repo: str, variant: str | None) -> None:
    assert HubRef.parse(text) == HubRef(repo, variant)


@pytest.mark.unit
@pytest.mark.parametrize("text", ["REPO", "ORG/", "/REPO", "ORG/RE/PO", "", "ORG/RE PO"])
def test_hub_ref_refuses(text: str) -> None:
    with pytest.raises(StartupError, match="ORG/REPO"):
        HubRef.parse(text)


@pytest.mark.unit
def test_plan_picks_the_variant_by_the_folder_logic(tmp_path: Path) -> None:
    """The variants' genai_config.json files (step 1's fetch) decide, as on disk."""
    variants: list[tuple[str, list[dict[str, dict[str, str]]]]] = [
        (CPU_VARIANT, []),
        (CUDA_VARIANT, [{"cuda": {}}]),
    ]
    for variant, options in variants:
        (tmp_path / variant).mkdir(parents=True)
        config = {"model": {"decoder": {"session_options": {"provider_options": options}}}}
        (tmp_path / variant / "genai_config.json").write_text(json.dumps(config))
    listing = [
        "README.md",
        *(
            f"{v}/{f}"
            for v in (CPU_VARIANT, CUDA_VARIANT)
            for f in ("genai_config.json", "model.onnx")
        ),
    ]
    cpu = plan_files(tmp_path, listing, "cpu", None, "hf:ORG/REPO")
    assert (cpu.patterns, cpu.serve) == ((f"{CPU_VARIANT}/*",), CPU_VARIANT)
    cuda = plan_files(tmp_path, listing, "cuda", None, "hf:ORG/REPO")
    assert cuda.serve == CUDA_VARIANT
    pinned = plan_files(tmp_path, listing, "cpu", "cuda-fp16", "hf:ORG/REPO")
    assert pinned.serve == CUDA_VARIANT
    with pytest.raises(StartupError, match="no variant for the qnn execution provider"):
        plan_files(tmp_path, listing, "qnn", None, "hf:ORG/REPO")


@pytest.mark.unit
def test_plan_of_a_folder_and_of_an_onnx_export(tmp_path: Path) -> None:
    whole = plan_files(tmp_path, ["genai_config.json", "model.onnx"], "cpu", None, "hf:O/R")
    assert (whole.patterns, whole.serve) == (("*",), "")
    export = [
        "config.json",
        "tokenizer.json",
        "onnx/model.onnx",
        "onnx/model.onnx_data",
        "onnx/model_fp16.onnx",
        "onnx/model_q4.onnx",
    ]
    plan = plan_files(tmp_path, export, "cpu", None, "hf:O/R")
    assert plan.variant == "onnx/model_q4.onnx"
    assert set(plan.patterns) == {"config.json", "tokenizer.json", "onnx/model_q4.onnx"}
    fp32 = plan_files(tmp_path, export, "cpu", "model", "hf:O/R")
    assert set(fp32.patterns) == {
        "config.json",
        "tokenizer.json",
        "onnx/model.onnx",
        "onnx/model.onnx_data",
    }
    with pytest.raises(StartupError, match="no genai_config.json"):
        plan_files(tmp_path, ["README.md"], "cpu", None, "hf:O/R")


@pytest.mark.unit
def test_models_file_keeps_a_hub_path(tmp_path: Path) -> None:
    file = tmp_path / "models.toml"
    file.write_text('[[models]]\nname = "pulled"\npath = "hf:ORG/REPO:cpu-int4"\n')
    (entry,) = read_models_file(file).models
    assert str(entry.path) == "hf:ORG/REPO:cpu-int4"


# -- the real client against the local hub, in this process


@pytest.mark.model
def test_pull_fetches_the_cpu_variant_only_and_serves_it(hub: LocalHub) -> None:
    pulled = fetch(HubRef(VARIANTS), "cpu", local_only=False)
    assert pulled.path.name == CPU_VARIANT.rsplit("/", 1)[1]
    fetched = hub.downloads()
    assert f"{VARIANTS}/{CPU_VARIANT}/model.onnx" in fetched
    assert DATA in fetched
    # of the CUDA variant, its genai_config.json alone: it says which provider it is for
    assert [f for f in fetched if CUDA_VARIANT in f] == [
        f"{VARIANTS}/{CUDA_VARIANT}/genai_config.json"
    ]
    snapshot = pulled.path.parents[1]
    assert not (snapshot / CUDA_VARIANT / "model.onnx").exists()
    assert not (snapshot / "README.md").exists()

    hub.requests.clear()
    with make_client(model_dir=f"hf:{VARIANTS}", device="cpu") as client:
        wait_ready(client)
        answer = client.post(
            "/v1/chat",
            json={"messages": [{"role": "user", "content": "Hello!"}], "max_tokens": 16},
        )
    assert answer.status_code == 200, answer.text
    assert answer.json()["content"].strip()
    assert hub.requests == []  # in the cache: served without asking the hub


@pytest.mark.model
def test_an_interrupted_transfer_resumes_with_a_range(
    hub: LocalHub, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The connection drops mid-file: the client asks for the rest (Range) and the file is
    whole. It resumes from its last whole chunk (10 MB by default; 1 MiB here, so that the
    demo's 9 MB file is cut after some)."""
    import huggingface_hub.constants

    monkeypatch.setattr(huggingface_hub.constants, "DOWNLOAD_CHUNK_SIZE", 1 << 20)
    hub.cut[DATA] = 3 * (1 << 20) + 123
    pulled = fetch(HubRef(VARIANTS), "cpu", local_only=False)
    ranges = [r for m, p, r in hub.requests if m == "GET" and p.endswith("model.onnx.data")]
    assert ranges == [None, f"bytes={3 << 20}-"]
    assert DATA.rsplit("/", 1)[1] in {Path(f).name for f in pulled.fetched}  # and checked


@pytest.mark.model
def test_a_failed_pull_goes_on_where_it_stopped(hub: LocalHub) -> None:
    hub.fail.add(DATA)
    with pytest.raises(StartupError, match="download failed"):
        fetch(HubRef(VARIANTS), "cpu", local_only=False)
    hub.fail.clear()
    hub.requests.clear()
    pulled = fetch(HubRef(VARIANTS), "cpu", local_only=False)
    assert hub.downloads() == [DATA]  # the files that had arrived are not fetched again
    assert pulled.fetched == (f"{CPU_VARIANT}/model.onnx.data",)


@pytest.mark.model
def test_a_corrupt_file_is_caught_and_removed(hub: LocalHub) -> None:
    hub.corrupt.add(DATA)
    with pytest.raises(StartupError, match="checksum mismatch") as caught:
        fetch(HubRef(VARIANTS), "cpu", local_only=False)
    assert "model.onnx.data" in str(caught.value) and "\n" not in str(caught.value)
    with pytest.raises(NotCached, match="model.onnx.data"):
        fetch(HubRef(VARIANTS), "cpu", local_only=True)  # the bad copy is gone from the cache
    hub.corrupt.clear()
    hub.requests.clear()
    fetch(HubRef(VARIANTS), "cpu", local_only=False)
    assert hub.downloads() == [DATA]


@pytest.mark.model
def test_offline_serves_from_the_cache_or_says_what_is_missing(
    hub: LocalHub, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(NotCached) as missing:
        resolve(cpu_model("test-org/demo-llama"))
    message = str(missing.value)
    assert "hf:test-org/demo-llama is not in the Hugging Face cache" in message
    assert "python main_genai.py pull test-org/demo-llama" in message and "\n" not in message

    monkeypatch.delenv("HF_HUB_OFFLINE")
    hub.fail.add(DATA)
    with pytest.raises(StartupError):
        resolve(cpu_model(VARIANTS))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(NotCached, match=r"1 file\(s\) missing \(.*model\.onnx\.data\)"):
        resolve(cpu_model(VARIANTS))

    hub.fail.clear()
    monkeypatch.delenv("HF_HUB_OFFLINE")
    resolve(cpu_model(VARIANTS))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    hub.requests.clear()
    served = resolve(cpu_model(VARIANTS))
    assert (served.path / "genai_config.json").is_file()
    assert hub.requests == []


# -- the command line and the server as processes


def hub_env(hub: LocalHub, cache: Path, **more: str) -> dict[str, str]:
    """The hub settings of a process pointed at ``hub`` with the cache ``cache``."""
    return {"HF_ENDPOINT": hub.url, "HF_HUB_CACHE": str(cache), "HF_HUB_OFFLINE": "0", **more}


@pytest.mark.live
def test_pull_command_then_serve_offline(hub: LocalHub, tmp_path: Path) -> None:
    cache = tmp_path / "cli-cache"
    pull = subprocess.run(
        [sys.executable, "main_genai.py", "pull", VARIANTS],
        cwd=ROOT,
        env=clean_env(**hub_env(hub, cache)),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert pull.returncode == 0, pull.stderr
    assert "Fetching" in pull.stderr and "100%" in pull.stderr  # huggingface_hub's bars
    assert f"variant {CPU_VARIANT}" in pull.stdout
    assert f"GENAI_MODEL_DIR=hf:{VARIANTS}" in pull.stdout
    assert not any(CUDA_VARIANT in f and "genai_config" not in f for f in hub.downloads())

    hub.requests.clear()
    env = hub_env(hub, cache, HF_HUB_OFFLINE="1")
    with live_server(env=env, GENAI_MODEL_DIR=f"hf:{VARIANTS}", GENAI_DEVICE="cpu") as server:
        answer = httpx.post(
            f"{server.url}/v1/chat",
            json={"messages": [{"role": "user", "content": "Hello!"}], "max_tokens": 8},
            timeout=60,
        )
    assert answer.status_code == 200, answer.text
    assert hub.requests == []


@pytest.mark.live
def test_serve_downloads_at_start(hub: LocalHub, tmp_path: Path) -> None:
    env = hub_env(hub, tmp_path / "start-cache")
    with live_server(env=env, GENAI_MODEL_DIR="hf:test-org/demo-llama") as server:
        health = httpx.get(f"{server.url}/healthz", timeout=10).json()
    assert set(health["models"].values()) == {"ok"}
    assert "test-org/demo-llama/model.onnx.data" in hub.downloads()


@pytest.mark.live
@pytest.mark.parametrize("repo", ["test-org/demo-llama", "test-org/absent"])
def test_offline_and_not_cached_is_one_line(hub: LocalHub, tmp_path: Path, repo: str) -> None:
    proc = subprocess.run(
        [sys.executable, "main_genai.py"],
        cwd=ROOT,
        env=clean_env(
            **hub_env(hub, tmp_path / "empty", HF_HUB_OFFLINE="1", GENAI_MODEL_DIR=f"hf:{repo}")
        ),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert errors == [
        f"error: hf:{repo} is not in the Hugging Face cache, and HF_HUB_OFFLINE=1 forbids "
        f"downloading. Pull it where the hub is reachable: python main_genai.py pull {repo}"
    ]
    assert hub.requests == []
