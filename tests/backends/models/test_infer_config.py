"""A genai_config.json inferred for an ONNX export that has none: from the graph and the Hugging
Face files, written to a cache folder (never into the model folder), and refused with a message
naming what is missing when it cannot be inferred."""

from __future__ import annotations

import json
import logging
import os
import shutil
from pathlib import Path

import pytest

from backends.errors import StartupError
from backends.models.folder import inspect_model_folder
from backends.models.infer_config import (
    CannotInfer,
    HFFiles,
    infer_genai_config,
    read_hf_files,
)
from backends.models.inferred_folder import write_inferred_folder
from backends.models.onnx_graph import GraphIO, TensorInfo, read_graph_io
from config.settings import REPO_ROOT

pytestmark = pytest.mark.unit

OPTIMUM = REPO_ROOT / "tests" / "hub_models" / "optimum-llama"


def snapshot(folder: Path) -> dict[str, tuple[int, int]]:
    return {
        p.relative_to(folder).as_posix(): (p.stat().st_size, p.stat().st_mtime_ns)
        for p in folder.rglob("*")
    }


def test_inferred_from_an_optimum_export() -> None:
    graph = read_graph_io(OPTIMUM / "onnx" / "model.onnx")
    config = infer_genai_config(graph, read_hf_files(OPTIMUM), "onnx/model.onnx")
    model = config["model"]
    decoder = model["decoder"]
    assert model["type"] == "decoder"
    assert (model["context_length"], model["vocab_size"]) == (2048, 1024)
    assert (model["eos_token_id"], model["bos_token_id"], model["pad_token_id"]) == (2, 0, 0)
    # From the past tensors' shapes: 1 KV head of 16, while config.json has 2 attention heads.
    assert (decoder["num_key_value_heads"], decoder["head_size"]) == (1, 16)
    assert (decoder["num_attention_heads"], decoder["hidden_size"]) == (2, 32)
    assert decoder["num_hidden_layers"] == 2
    assert decoder["inputs"] == {
        "input_ids": "input_ids",
        "attention_mask": "attention_mask",
        "position_ids": "position_ids",
        "past_key_names": "past_key_values.%d.key",
        "past_value_names": "past_key_values.%d.value",
    }
    assert decoder["outputs"] == {
        "logits": "logits",
        "present_key_names": "present.%d.key",
        "present_value_names": "present.%d.value",
    }
    assert decoder["filename"] == "onnx/model.onnx"
    assert config["search"]["past_present_share_buffer"] is False


def test_the_folder_goes_to_the_cache_and_the_model_folder_is_untouched(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    before = snapshot(OPTIMUM)
    cache = tmp_path / "cache"
    with caplog.at_level(logging.INFO, logger="genai.model"):
        folder = inspect_model_folder(OPTIMUM, provider="cpu", cache_dir=cache)
    assert snapshot(OPTIMUM) == before
    assert folder.path.parent == cache and folder.source == OPTIMUM
    assert (folder.path / "onnx").resolve() == (OPTIMUM / "onnx").resolve()
    assert (folder.path / "onnx" / "model.onnx").is_file()
    for name in ("genai_config.json", "tokenizer.json", "tokenizer_config.json"):
        assert (folder.path / name).is_file()
    assert folder.chat_templates and folder.context_length == 2048
    assert "inferred genai_config.json" in folder.origin
    assert f"written to {folder.path}" in caplog.text
    assert "config.json, generation_config.json" in caplog.text

    caplog.clear()
    with caplog.at_level(logging.INFO, logger="genai.model"):
        again = inspect_model_folder(OPTIMUM, provider="cpu", cache_dir=cache)
    assert again.path == folder.path and f"reusing {folder.path}" in caplog.text
    assert len(list(cache.iterdir())) == 1  # no leftover build folders


def test_a_read_only_model_folder(tmp_path: Path) -> None:
    src = tmp_path / "ro"
    shutil.copytree(OPTIMUM, src)
    for path in [*src.rglob("*"), src]:
        path.chmod(0o555 if path.is_dir() else 0o444)
    try:
        folder = inspect_model_folder(src, provider="cpu", cache_dir=tmp_path / "cache")
        assert folder.path.parent == tmp_path / "cache"
    finally:
        for path in [src, *src.rglob("*")]:
            path.chmod(0o755 if path.is_dir() else 0o644)


def test_a_changed_model_gets_a_new_cache_entry(tmp_path: Path) -> None:
    src = tmp_path / "m"
    shutil.copytree(OPTIMUM, src)
    first = inspect_model_folder(src, provider="cpu", cache_dir=tmp_path / "cache").path
    config = json.loads((src / "config.json").read_text())
    config["max_position_embeddings"] = 1024
    (src / "config.json").write_text(json.dumps(config))
    second = inspect_model_folder(src, provider="cpu", cache_dir=tmp_path / "cache")
    assert second.path != first and second.context_length == 1024


def test_model_files_at_the_top_and_tokenizer_beside_them(tmp_path: Path) -> None:
    # optimum-cli's own output: everything in one folder, the chat template in a json file.
    src = tmp_path / "flat"
    shutil.copytree(OPTIMUM / "onnx", src)
    for name in ("config.json", "generation_config.json", "tokenizer.json"):
        shutil.copy(OPTIMUM / name, src / name)
    tokenizer_config = json.loads((OPTIMUM / "tokenizer_config.json").read_text())
    tokenizer_config.pop("chat_template", None)
    (src / "tokenizer_config.json").write_text(json.dumps(tokenizer_config))
    template = (OPTIMUM / "chat_template.jinja").read_text()
    (src / "chat_template.json").write_text(json.dumps({"chat_template": template}))
    folder = inspect_model_folder(src, provider="cpu", cache_dir=tmp_path / "cache")
    assert folder.config["model"]["decoder"]["filename"] == "onnx/model.onnx"
    assert folder.chat_templates["default"] == template


def test_when_another_process_wrote_it_first_its_folder_is_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    graph = read_graph_io(OPTIMUM / "onnx" / "model.onnx")
    config = infer_genai_config(graph, read_hf_files(OPTIMUM), "onnx/model.onnx")
    model_file = OPTIMUM / "onnx" / "model.onnx"
    rename = Path.rename

    def racing_rename(self: Path, target: Path) -> Path:
        Path(target).mkdir()  # the other process's complete folder lands first
        Path(target, "genai_config.json").write_text("{}")
        return rename(self, target)

    monkeypatch.setattr(Path, "rename", racing_rename)
    path, reused = write_inferred_folder(OPTIMUM, model_file, config, tmp_path)
    assert reused and (path / "genai_config.json").read_text() == "{}"
    assert [p.name for p in tmp_path.iterdir()] == [path.name]  # our build folder is gone


@pytest.mark.skipif(os.geteuid() == 0 if hasattr(os, "geteuid") else True, reason="root")
def test_an_unwritable_cache_falls_back_to_the_temp_folder(tmp_path: Path) -> None:
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o555)
    folder = inspect_model_folder(OPTIMUM, provider="cpu", cache_dir=locked / "cache")
    assert "onnx-genai-server-configs" in str(folder.path)


# What cannot be inferred: a hand-made graph and Hugging Face files.
def t(name: str, dtype: str = "float", shape: tuple[object, ...] = ()) -> TensorInfo:
    return TensorInfo(name, dtype, shape)  # type: ignore[arg-type]


def kv(layers: int = 2, shape: tuple[object, ...] = ("b", 2, "p", 16)) -> list[TensorInfo]:
    return [
        t(f"past_key_values.{i}.{k}", "float", shape)
        for i in range(layers)
        for k in ("key", "value")
    ]


def present(layers: int = 2) -> list[TensorInfo]:
    return [
        t(f"present.{i}.{k}", "float", ("b", 2, "t", 16))
        for i in range(layers)
        for k in ("key", "value")
    ]


IDS = [t("input_ids", "int64", ("b", "s")), t("attention_mask", "int64", ("b", "t"))]
LOGITS = t("logits", "float", ("b", "s", 1024))
HF = HFFiles(
    config={"max_position_embeddings": 4096, "num_attention_heads": 4, "hidden_size": 64},
    generation={"eos_token_id": [2, 7]},
    has_tokenizer=True,
)


def graph(inputs: list[TensorInfo], outputs: list[TensorInfo]) -> GraphIO:
    return GraphIO(tuple(inputs), tuple(outputs))


def test_a_minimal_graph_with_several_eos_ids() -> None:
    config = infer_genai_config(graph(IDS + kv(), [LOGITS, *present()]), HF, "model.onnx")
    assert config["model"]["eos_token_id"] == [2, 7]
    assert config["model"]["pad_token_id"] == 2  # none given: the first EOS
    assert config["model"]["context_length"] == 4096
    assert "position_ids" not in config["model"]["decoder"]["inputs"]


@pytest.mark.parametrize(
    ("inputs", "outputs", "hf", "needle"),
    [
        (
            IDS + kv(),
            [LOGITS, *present()],
            HFFiles(**{**HF.__dict__, "config": {**HF.config, "is_encoder_decoder": True}}),
            "encoder-decoder model (config.json says is_encoder_decoder)",
        ),  # noqa: E501
        (
            IDS + kv() + [t("encoder_hidden_states")],
            [LOGITS, *present()],
            HF,
            "encoder-decoder model (model.onnx takes ['encoder_hidden_states'])",
        ),  # noqa: E501
        (IDS, [LOGITS], HF, "no past key/value inputs (past_key_values.N.key / .value)"),
        (
            IDS + kv() + [t("use_cache_branch", "bool")],
            [LOGITS, *present()],
            HF,
            "merged decoder (input use_cache_branch)",
        ),  # noqa: E501
        (
            IDS + kv() + [t("token_type_ids", "int64")],
            [LOGITS, *present()],
            HF,
            "does not feed: ['token_type_ids']",
        ),  # noqa: E501
        (
            IDS[1:] + kv() + [t("inputs_embeds")],
            [LOGITS, *present()],
            HF,
            "no input_ids input (it takes inputs_embeds",
        ),  # noqa: E501
        (IDS + kv() + [t("pixel_values")], [LOGITS, *present()], HF, "multi-modal"),
        (IDS + kv(), [LOGITS], HF, "no present.N.key/value outputs"),
        (IDS + kv(), [LOGITS, *present(1)], HF, "1 present.%d.key tensors for 2 layers"),
        (IDS + kv(), [*present()], HF, "no logits output"),
        (
            IDS + kv(shape=("b", "h", "p", "d")),
            [LOGITS, *present()],
            HFFiles(
                has_tokenizer=True,
                generation={"eos_token_id": 2},
                config={"max_position_embeddings": 8},
            ),
            "the KV heads (past tensor dim 1, or config.json num_key_value_heads); the head size",
        ),  # noqa: E501
        (
            IDS + kv(),
            [LOGITS, *present()],
            HFFiles(**{**HF.__dict__, "config": {}}),
            "the context length (config.json max_position_embeddings",
        ),  # noqa: E501
        (
            IDS + kv(),
            [LOGITS, *present()],
            HFFiles(**{**HF.__dict__, "generation": {}}),
            "the EOS token id",
        ),  # noqa: E501
        (
            IDS + kv(),
            [LOGITS, *present()],
            HFFiles(**{**HF.__dict__, "has_tokenizer": False}),
            "a tokenizer (tokenizer.json or tokenizer.model)",
        ),  # noqa: E501
        (
            IDS
            + [t(f"past_key_values.{i}.key", "int8", ("b", 2, "p", 16)) for i in range(2)]
            + [t(f"past_key_values.{i}.value", "int8") for i in range(2)],
            [LOGITS, *present()],
            HF,
            "KV cache of type int8",
        ),  # noqa: E501
    ],
)
def test_what_cannot_be_inferred_is_named(
    inputs: list[TensorInfo], outputs: list[TensorInfo], hf: HFFiles, needle: str
) -> None:
    with pytest.raises(CannotInfer) as exc:
        infer_genai_config(graph(inputs, outputs), hf, "model.onnx")
    assert needle in str(exc.value)


def test_eos_from_the_tokenizer_and_context_from_model_max_length() -> None:
    hf = HFFiles(
        config={},
        tokenizer_config={"eos_token": {"content": "</s>"}, "model_max_length": 512},
        token_ids={"</s>": 5},
        has_tokenizer=True,
    )
    config = infer_genai_config(graph(IDS + kv(), [LOGITS, *present()]), hf, "model.onnx")
    assert config["model"]["eos_token_id"] == 5 and config["model"]["context_length"] == 512


def test_an_encoder_decoder_folder_is_refused_at_start(tmp_path: Path) -> None:
    (tmp_path / "onnx").mkdir()
    for name in ("encoder_model.onnx", "decoder_model_merged.onnx"):
        shutil.copy(OPTIMUM / "onnx" / "model.onnx", tmp_path / "onnx" / name)
    with pytest.raises(StartupError) as exc:
        inspect_model_folder(tmp_path, provider="cpu", cache_dir=tmp_path / "cache")
    text = str(exc.value)
    assert "has no genai_config.json, and none can be inferred" in text
    assert "encoder-decoder model (onnx/encoder_model.onnx)" in text


def test_a_graph_without_kv_cache_is_refused_at_start(tmp_path: Path) -> None:
    for name in ("config.json", "tokenizer.json", "tokenizer_config.json"):
        shutil.copy(OPTIMUM / name, tmp_path / name)
    (tmp_path / "model.onnx").write_bytes(b"\x08\x07")  # a ModelProto with no graph
    with pytest.raises(StartupError, match="model.onnx is not a readable ONNX model"):
        inspect_model_folder(tmp_path, provider="cpu", cache_dir=tmp_path / "cache")


def test_the_builders_graph_without_its_config_is_refused(
    tmp_path: Path, demo_model_dir: Path
) -> None:
    # Its KV head size is symbolic and there is no config.json to say it.
    shutil.copytree(demo_model_dir, tmp_path / "m")
    (tmp_path / "m" / "genai_config.json").unlink()
    with pytest.raises(StartupError) as exc:
        inspect_model_folder(tmp_path / "m", provider="cpu", cache_dir=tmp_path / "cache")
    assert "cannot infer the head size (past tensor dim 3, or config.json head_dim)" in str(
        exc.value
    )
    assert not (tmp_path / "cache").exists() or not any((tmp_path / "cache").iterdir())


def test_a_folder_with_nothing_to_serve(tmp_path: Path) -> None:
    (tmp_path / "README.md").write_text("hi")
    with pytest.raises(StartupError, match="no genai_config.json, no variant subfolder"):
        inspect_model_folder(tmp_path, provider="cpu")


def test_a_broken_config_json_is_named(tmp_path: Path) -> None:
    shutil.copytree(OPTIMUM, tmp_path / "m")
    (tmp_path / "m" / "config.json").write_text("{broken")
    with pytest.raises(StartupError, match="config.json is not readable JSON"):
        inspect_model_folder(tmp_path / "m", provider="cpu", cache_dir=tmp_path / "cache")
