"""A Whisper model folder on onnxruntime-genai: its special tokens, the decoder prompt, and one
window's greedy (or sampled) transcription on ``og.Generator``. Owner-thread code only: every
call here happens on the speech service's thread.
"""

from __future__ import annotations

import json
import math
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from backends.errors import InvalidRequest
from backends.models.loader import usable_cpus
from backends.speech.audio import InvalidAudio
from backends.speech.text import ByteText
from backends.text import check_text


def is_speech_folder(path: Path) -> bool:
    """A builder folder whose genai_config.json names a Whisper model."""
    config = Path(path) / "genai_config.json"
    try:
        return bool(json.loads(config.read_text())["model"]["type"] == "whisper")
    except (OSError, ValueError, KeyError, TypeError):
        return False


@dataclass(frozen=True)
class WindowResult:
    tokens: tuple[int, ...]  # generated, the end-of-text token left out
    text: str
    avg_logprob: float
    finish_reason: str  # "stop" (end of text) or "length" (the model's context)
    prompt_tokens: int


@dataclass(frozen=True)
class Detection:
    language: str
    no_speech_prob: float


class WhisperModel:
    """The loaded model, its processor and tokenizer, and Whisper's token ids."""

    def __init__(self, path: Path, intra_op_threads: int | None = None) -> None:
        import onnxruntime_genai as og

        self._og = og
        config = og.Config(str(path))
        # As for the chat models: every usable CPU unless told (og's default acts as one).
        threads = intra_op_threads or usable_cpus()
        # No CPU arena: onnxruntime's would keep what the longest decoding needed (issue 37).
        overlay = {
            "session_options": {"intra_op_num_threads": threads, "enable_cpu_mem_arena": False}
        }
        config.overlay(json.dumps({"model": {"encoder": overlay, "decoder": overlay}}))
        self.model = og.Model(config)
        self.processor = self.model.create_multimodal_processor()
        self.tokenizer = og.Tokenizer(self.model)
        genai = json.loads((Path(path) / "genai_config.json").read_text())["model"]
        self.context_length = int(genai["context_length"])
        self.eot = int(genai["eos_token_id"])
        self.vocab_size = int(genai["vocab_size"])
        self.languages = self._languages()
        self.no_speech = self._id("<|nospeech|>")
        self.bytes = ByteText.from_folder(Path(path), self.eot)

    def _id(self, token: str) -> int | None:
        ids = list(self.tokenizer.encode(token))
        return int(ids[0]) if len(ids) == 1 and ids[0] >= self.eot else None

    def _languages(self) -> dict[str, int]:
        """Language code -> token id, for every ``<|xx|>`` language token the model has."""
        from backends.speech.languages import CODES

        found = {}
        for code in CODES:
            token = self._id(f"<|{code}|>")
            if token is not None:
                found[code] = token
        return found

    # ---- prompts --------------------------------------------------------------------------
    def check_language(self, language: str | None) -> str | None:
        if language is None:
            return None
        code = language.strip().lower()
        if code not in self.languages:
            known = ", ".join(sorted(self.languages))
            raise InvalidRequest(
                f"The model does not know the language {language!r}; it knows {known}.",
                param="language",
            )
        return code

    def prompt_ids(self, prompt: str | None) -> list[int]:
        """The previous-text tokens Whisper is conditioned on; too long a prompt is refused."""
        if not prompt or not prompt.strip():
            return []
        check_text(prompt, "prompt", nul=True)
        ids = [int(t) for t in self.tokenizer.encode(" " + prompt.strip())]
        room = self.context_length // 2 - 1
        if len(ids) > room:
            raise InvalidRequest(
                f"The prompt is {len(ids)} tokens; this model takes at most {room}.",
                param="prompt",
            )
        return ids

    def _decoder_prompt(self, language: str, prompt: str | None) -> str:
        head = f"<|startofprev|> {prompt.strip()}" if prompt and prompt.strip() else ""
        return f"{head}<|startoftranscript|><|{language}|><|transcribe|><|notimestamps|>"

    # ---- running ---------------------------------------------------------------------------
    def _generator(self, audio: bytes, text: str, max_length: int, temperature: float) -> Any:
        og = self._og
        try:
            inputs = self.processor(text, audios=og.Audios.open_bytes(audio))
        except RuntimeError as exc:  # the audio processor could not decode these bytes
            raise InvalidAudio(
                f"The audio processor could not decode the file ({str(exc)[:160]}).",
                param="file",
            ) from None
        params = og.GeneratorParams(self.model)
        if temperature > 0:
            params.set_search_options(
                do_sample=True,
                temperature=temperature,
                top_k=self.vocab_size,
                top_p=1.0,
                max_length=max_length,
            )
        else:
            params.set_search_options(do_sample=False, max_length=max_length)
        generator = og.Generator(self.model, params)
        generator.set_inputs(inputs)
        return generator

    def detect(self, audio: bytes) -> Detection:
        """Whisper's language detection: the most likely language token after the start of
        the transcript; and the probability of ``<|nospeech|>`` there."""
        generator = self._generator(audio, "<|startoftranscript|>", self.context_length, 0.0)
        generator.generate_next_token()
        logits = np.asarray(generator.get_logits(), dtype=np.float64).reshape(-1)
        codes = list(self.languages)
        best = codes[int(np.argmax([logits[self.languages[c]] for c in codes]))]
        no_speech = 0.0
        if self.no_speech is not None:
            probs = _softmax(logits)
            no_speech = float(probs[self.no_speech])
        return Detection(best, no_speech)

    def transcribe(
        self,
        audio: bytes,
        language: str,
        prompt: str | None,
        temperature: float,
        on_text: Callable[[str], None],
        cancelled: Callable[[], bool],
    ) -> WindowResult:
        text = self._decoder_prompt(language, prompt)
        generator = self._generator(audio, text, self.context_length, temperature)
        prompt_tokens = len(generator.get_sequence(0))
        stream = self.bytes.stream() if self.bytes is not None else None
        og_stream = self.tokenizer.create_stream()
        tokens: list[int] = []
        pieces: list[str] = []
        logprob = 0.0
        finish = "length"
        for _ in range(self.context_length - prompt_tokens):  # is_done() alone overruns
            if generator.is_done():
                break
            if cancelled():
                finish = "cancelled"
                break
            generator.generate_next_token()
            token = int(generator.get_next_tokens()[0])
            logits = np.asarray(generator.get_logits(), dtype=np.float64).reshape(-1)
            logprob += float(logits[token] - _logsumexp(logits))
            if token == self.eot:
                finish = "stop"
                break
            tokens.append(token)
            if token < self.eot:  # text; special tokens and timestamps are not
                piece = stream.add(token) if stream is not None else og_stream.decode(token)
                if piece:
                    pieces.append(piece)
                    on_text(piece)
        rest = stream.flush() if stream is not None else ""
        if rest:
            pieces.append(rest)
            on_text(rest)
        count = max(len(tokens) + (finish == "stop"), 1)
        return WindowResult(
            tokens=tuple(tokens),
            text="".join(pieces),
            avg_logprob=logprob / count,
            finish_reason=finish,
            prompt_tokens=prompt_tokens,
        )


def compression_ratio(text: str) -> float:
    """Whisper's repetition check: text bytes over their zlib-compressed size."""
    data = text.encode("utf-8")
    return len(data) / len(zlib.compress(data)) if data else 0.0


def _logsumexp(x: np.ndarray) -> float:
    top = float(x.max())
    return top + math.log(float(np.exp(x - top).sum()))


def _softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max())
    return np.asarray(e / e.sum())
