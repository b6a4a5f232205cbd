"""Build a tiny random-weight Whisper model folder offline, with the official builder.

No model hub is reachable here, so the model is made locally: a random-init
``WhisperForConditionalGeneration`` from a small ``WhisperConfig`` (80 mel bins, 1,500 encoder
positions as every Whisper has, 2+2 layers, width 64), a Whisper tokenizer made from a
byte-level BPE trained on the built-in corpus plus Whisper's special tokens (start of
transcript, a few languages, tasks, no-timestamps, the 1,501 timestamps), then
``python -m onnxruntime_genai.models.builder``, which builds Whisper whole: encoder.onnx,
decoder.onnx, genai_config.json and audio_processor_config.json.

The folder also keeps the Hugging Face files (config, generation config, the feature extractor's
preprocessor_config.json, the weights) so the oracle can be re-derived, a few synthetic clips
under samples/ (wav, flac, mp3), and expected.json: Hugging Face ``generate()`` (greedy) on each
clip, and how far onnxruntime-genai's audio features are from ``WhisperFeatureExtractor``'s.

    python -m modelkit.whisper --out tests/hub_models/whisper-tiny
    python -m modelkit.whisper --out tests/hub_models/whisper-tiny --check
    python -m modelkit.whisper --shape tiny --out /some/folder   # benchmark size

Needs the build-time packages in requirements-build.txt (torch, transformers, soundfile, ...).
"""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path
from typing import Any

from modelkit import cli
from modelkit.builder import draw_biases, run_builder
from modelkit.expected import compare, read_expected, report, write_expected
from modelkit.tokenizer import byte_level_bpe, corpus

CHECKED = ("transcriptions", "prompted")  # what --check re-derives

SHAPE = {
    "num_mel_bins": 80,
    "d_model": 64,
    "encoder_layers": 2,
    "decoder_layers": 2,
    "encoder_attention_heads": 2,
    "decoder_attention_heads": 2,
    "encoder_ffn_dim": 128,
    "decoder_ffn_dim": 128,
    "max_source_positions": 1500,  # 3,000 mel frames (30 s) after the stride-2 conv
    "max_target_positions": 448,
}
BPE_VOCAB = 512
LANGUAGES = ["en", "zh", "de", "es", "ru", "ko", "fr", "ja"]  # Whisper's first eight, its order
# whisper-tiny's real dimensions, for the benchmark (not committed): the same tokenizer padded
# to Whisper's 50,257 text tokens (unreachable fillers) and all its languages, so the vocabulary
# (51,866) and the LM head are full size.
TINY = {
    **SHAPE,
    "d_model": 384,
    "encoder_layers": 4,
    "decoder_layers": 4,
    "encoder_attention_heads": 6,
    "decoder_attention_heads": 6,
    "encoder_ffn_dim": 1536,
    "decoder_ffn_dim": 1536,
}
TINY_TEXT_TOKENS = 50257
TIMESTAMPS = 1501  # <|0.00|> .. <|30.00|>
RATE = 16000
SAMPLES = {  # name -> (seconds, seed); each written as wav, flac and mp3
    "tone": (3.0, 1),
    "chirp": (7.5, 2),
}
SILENCE = 0.25  # seconds of digital silence at each end of a clip
ORACLE_FORMATS = ("wav", "flac")  # lossless: the same samples reach both sides
NEW_TOKENS = SHAPE["max_target_positions"] - 4  # what fits after the four prompt tokens
PROMPT = "river and city"  # previous text for the prompted transcription
# The reference features kept in expected.json: every 100th frame.
KEPT_FRAMES = range(0, 3000, 100)


def special_tokens(languages: list[str]) -> tuple[list[str], list[str]]:
    """Whisper's special tokens (in its order) and its timestamps (added, not special)."""
    special = ["<|endoftext|>", "<|startoftranscript|>"]
    special += [f"<|{lang}|>" for lang in languages]
    special += [
        "<|translate|>",
        "<|transcribe|>",
        "<|startoflm|>",
        "<|startofprev|>",
        "<|nospeech|>",
        "<|notimestamps|>",
    ]
    stamps = [f"<|{i * 0.02:.2f}|>" for i in range(TIMESTAMPS)]
    return special, stamps


def make_tokenizer(out_dir: Path, languages: list[str], text_tokens: int = BPE_VOCAB) -> Any:
    from transformers import AddedToken, WhisperTokenizer

    bpe = byte_level_bpe(corpus(), BPE_VOCAB, byte_level_post=False)
    model = json.loads(bpe.to_str())["model"]
    for i in range(len(model["vocab"]), text_tokens):  # fillers no merge ever produces
        model["vocab"][f"\u0120<filler{i}>"] = i
    merges = [tuple(m.split(" ")) if isinstance(m, str) else tuple(m) for m in model["merges"]]
    tok = WhisperTokenizer(vocab=model["vocab"], merges=merges)
    special, stamps = special_tokens(languages)
    tok.add_special_tokens(
        {"additional_special_tokens": special},
        replace_extra_special_tokens=True,
    )
    tok.add_tokens([AddedToken(s, special=False, normalized=False) for s in stamps])
    tok.save_pretrained(out_dir)
    return WhisperTokenizer.from_pretrained(out_dir)


def synth(seconds: float, seed: int) -> Any:
    """A speech-like clip: a gliding harmonic tone in syllable-like bursts, with some noise,
    between two stretches of silence (the frames at the clip's edges are where
    onnxruntime-genai's features and WhisperFeatureExtractor's differ: see expected.json)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    t = np.arange(int(seconds * RATE)) / RATE
    pitch = 120 + 60 * np.sin(2 * np.pi * 0.7 * t + seed)
    phase = 2 * np.pi * np.cumsum(pitch) / RATE
    voice = sum(np.sin(k * phase) / k for k in range(1, 8))
    bursts = 0.5 + 0.5 * np.sin(2 * np.pi * 3.1 * t) ** 2
    x = 0.25 * voice * bursts + 0.01 * rng.standard_normal(t.shape)
    x = x / np.abs(x).max() * 0.8
    edge = int(SILENCE * RATE)
    x[:edge] = 0.0
    x[-edge:] = 0.0
    return x.astype(np.float32)


def write_samples(samples_dir: Path) -> None:
    import soundfile as sf

    samples_dir.mkdir(parents=True, exist_ok=True)
    for name, (seconds, seed) in SAMPLES.items():
        x = synth(seconds, seed)
        sf.write(samples_dir / f"{name}.wav", x, RATE, subtype="PCM_16")
        sf.write(samples_dir / f"{name}.flac", x, RATE, subtype="PCM_16")
        sf.write(samples_dir / f"{name}.mp3", x, RATE, format="MP3")


def make_hf_folder(hf_dir: Path, seed: int, init_std: float, shape: str = "test") -> None:
    import torch
    from transformers import (
        GenerationConfig,
        WhisperConfig,
        WhisperFeatureExtractor,
        WhisperForConditionalGeneration,
    )

    from backends.speech.languages import CODES

    dims = TINY if shape == "tiny" else SHAPE
    languages = list(CODES) if shape == "tiny" else LANGUAGES
    tok = make_tokenizer(hf_dir, languages, TINY_TEXT_TOKENS if shape == "tiny" else BPE_VOCAB)
    ids = tok.convert_tokens_to_ids
    eot, sot = ids("<|endoftext|>"), ids("<|startoftranscript|>")
    config = WhisperConfig(
        **dims,
        vocab_size=len(tok),
        init_std=init_std,
        bos_token_id=eot,
        eos_token_id=eot,
        pad_token_id=eot,
        decoder_start_token_id=sot,
        begin_suppress_tokens=None,
        suppress_tokens=None,
    )
    torch.manual_seed(seed)
    model = WhisperForConditionalGeneration(config).eval()
    draw_biases(model, init_std)
    model.generation_config = GenerationConfig(
        decoder_start_token_id=sot,
        bos_token_id=eot,
        eos_token_id=eot,
        pad_token_id=eot,
        max_length=SHAPE["max_target_positions"],
        is_multilingual=True,
        lang_to_id={f"<|{lang}|>": ids(f"<|{lang}|>") for lang in languages},
        task_to_id={"transcribe": ids("<|transcribe|>"), "translate": ids("<|translate|>")},
        no_timestamps_token_id=ids("<|notimestamps|>"),
        prev_sot_token_id=ids("<|startofprev|>"),
        forced_decoder_ids=None,
        suppress_tokens=[],
        begin_suppress_tokens=[],
    )
    model.save_pretrained(hf_dir)
    WhisperFeatureExtractor(feature_size=SHAPE["num_mel_bins"]).save_pretrained(hf_dir)


# ---- the oracle --------------------------------------------------------------------------
HF_FILES = (
    "config.json",
    "generation_config.json",
    "preprocessor_config.json",
    "model.safetensors",
)


def decode_pcm(path: Path) -> Any:
    import soundfile as sf

    x, rate = sf.read(path, dtype="float32", always_2d=True)
    assert rate == RATE, (path, rate)
    return x.mean(axis=1)


def hf_features(folder: Path, pcm: Any) -> Any:
    from transformers import WhisperFeatureExtractor

    fe = WhisperFeatureExtractor.from_pretrained(folder)
    return fe(pcm, sampling_rate=RATE, return_tensors="np").input_features


def hf_transcribe(
    folder: Path, pcm: Any, language: str, prompt: str | None = None
) -> dict[str, Any]:
    """Hugging Face generate(), greedy, language and task given (no detection step), with
    ``prompt`` as previous text (``prompt_ids``) if given."""
    import torch
    from transformers import WhisperForConditionalGeneration, WhisperTokenizer

    model = WhisperForConditionalGeneration.from_pretrained(folder).eval()
    tok = WhisperTokenizer.from_pretrained(folder)
    features = torch.from_numpy(hf_features(folder, pcm))
    prompt_ids = tok.get_prompt_ids(prompt, return_tensors="pt") if prompt else None
    room = NEW_TOKENS - (len(prompt_ids) if prompt_ids is not None else 0)
    with torch.no_grad():
        out = model.generate(
            features,
            language=language,
            task="transcribe",
            do_sample=False,
            num_beams=1,
            max_new_tokens=room,
            prompt_ids=prompt_ids,
        )
    seq = [int(t) for t in out[0]]
    prefix = [int(t) for t in prompt_ids] if prompt_ids is not None else []
    prefix += [
        tok.convert_tokens_to_ids(t)
        for t in ("<|startoftranscript|>", f"<|{language}|>", "<|transcribe|>", "<|notimestamps|>")
    ]
    if seq[: len(prefix)] == prefix:
        seq = seq[len(prefix) :]
    # transformers 5.24's Whisper generate() ran on past max_new_tokens here (888 tokens, past
    # the 448 decoder positions); what fits in the model's context is the oracle.
    seq = seq[:room]
    if seq and seq[-1] == model.generation_config.eos_token_id:
        seq, finish = seq[:-1], "stop"
    else:
        finish = "length"
    return {
        "prompt_ids": prefix,
        "generated_ids": seq,
        "text": tok.decode(seq, skip_special_tokens=True),
        "finish_reason": finish,
    }


def hf_language(folder: Path, pcm: Any) -> str:
    """Hugging Face's language detection (``detect_language``), as a code."""
    import torch
    from transformers import WhisperForConditionalGeneration, WhisperTokenizer

    model = WhisperForConditionalGeneration.from_pretrained(folder).eval()
    tok = WhisperTokenizer.from_pretrained(folder)
    with torch.no_grad():
        token = model.detect_language(torch.from_numpy(hf_features(folder, pcm)))
    return str(tok.convert_ids_to_tokens([int(token[0])])[0])[2:-2]


def og_features(folder: Path, audio: bytes) -> Any:
    import numpy as np
    import onnxruntime_genai as og

    model = og.Model(str(folder))
    proc = model.create_multimodal_processor()
    inputs = proc("<|startoftranscript|>", audios=og.Audios.open_bytes(audio))
    return np.array(inputs["audio_features"].as_numpy())


def expected_outputs(folder: Path) -> dict[str, Any]:
    import numpy as np
    import transformers

    clips = []
    feature_error = {}
    reference = {}
    for name in SAMPLES:
        for fmt in ("wav", "flac", "mp3"):
            path = folder / "samples" / f"{name}.{fmt}"
            pcm = decode_pcm(path)
            hf = hf_features(folder, pcm)
            diff = np.abs(og_features(folder, path.read_bytes()) - hf)
            feature_error[f"{name}.{fmt}"] = {
                "max_abs": float(f"{diff.max():.3g}"),
                "mean_abs": float(f"{diff.mean():.3g}"),
            }
            if fmt == "wav":
                reference[name] = hf[0][:, list(KEPT_FRAMES)].T.round(6).tolist()
            if fmt in ORACLE_FORMATS:
                clips.append(
                    {
                        "file": f"samples/{name}.{fmt}",
                        "detected_language": hf_language(folder, pcm),
                        **hf_transcribe(folder, pcm, "en"),
                    }
                )
    prompted = {
        "file": "samples/tone.wav",
        "prompt": PROMPT,
        **hf_transcribe(folder, decode_pcm(folder / "samples" / "tone.wav"), "en", PROMPT),
    }
    return {
        "oracle": f"transformers {transformers.__version__} WhisperForConditionalGeneration"
        ".generate(), greedy, fp32, language en, task transcribe",
        "features": "max/mean |onnxruntime-genai audio_features - WhisperFeatureExtractor|",
        "feature_error": feature_error,
        "reference_frames": list(KEPT_FRAMES),
        "reference_features": reference,
        "max_new_tokens": NEW_TOKENS,
        "transcriptions": clips,
        "prompted": prompted,
    }


def build(out: Path, seed: int, init_std: float, shape: str = "test") -> None:
    with tempfile.TemporaryDirectory() as tmp:
        hf_dir = Path(tmp) / "hf"
        make_hf_folder(hf_dir, seed, init_std, shape)
        if out.exists():
            shutil.rmtree(out)
        out.mkdir(parents=True)
        run_builder(hf_dir, out, "fp32", [], cache_dir=Path(tmp) / "cache")
        for name in HF_FILES:
            shutil.copy2(hf_dir / name, out / name)
    if shape != "test":  # a benchmark model: no clips, no oracle
        print(f"wrote {out}")
        return
    write_samples(out / "samples")
    write_expected(out, expected_outputs(out))
    print(f"wrote {out}")


def check(out: Path) -> int:
    """The oracle's transcriptions re-derived from the weights in ``out``."""
    return report(compare(read_expected(out), expected_outputs(out), keys=CHECKED))


def main() -> None:
    ap = cli.parser(__doc__)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--init-std", type=float, default=0.2, help="std of the random weights")
    ap.add_argument(
        "--shape",
        choices=["test", "tiny"],
        default="test",
        help="test: the committed model (with clips and oracle); tiny: whisper-tiny's dimensions",
    )
    args = ap.parse_args()
    cli.build_or_check(args, lambda: build(args.out, args.seed, args.init_std, args.shape), check)


if __name__ == "__main__":
    main()
