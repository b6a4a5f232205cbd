"""Internal data exchanged between the doors, the core and the generation loop."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

# "grammar_error": the request's grammar (schema, regex, forced tool calls) failed mid-generation.
FinishReason = Literal["stop", "length", "cancelled", "timeout", "error", "grammar_error"]
# What a door sees of a choice's end. "cancelled" only when the door itself cancelled; an end
# the server imposed (a timeout, an operator's cancel, a shutdown) is raised as an error.
ChoiceFinish = Literal["stop", "length", "cancelled", "tool_calls"]
CancelCause = Literal["client", "admin", "shutdown"]
GuidanceKind = Literal["json_schema", "regex", "lark_grammar"]

SEED_MAX = 2**31 - 1  # the engine's random_seed is a 32-bit signed int
# Tokens per KV block: the batch engine's prefix store and KV events cut prompts into these,
# and /metrics reports it (vllm:cache_config_info) for the gateway's prefix-aware routing.
KV_BLOCK_TOKENS = 32


@dataclass(frozen=True)
class CallGrammar:
    """A lazy tool-call grammar, as llama-server's: the output is free until it holds
    ``trigger`` (the format's call marker); from the token where the trigger begins, the Lark
    ``grammar`` (llguidance) holds the rest to valid calls of the offered tools. Where the
    vocabulary has the marker as one token, ``trigger_token`` is its id."""

    trigger: str
    grammar: str
    trigger_token: int | None = None


# n-gram (prompt-lookup) speculation: the n-gram lengths looked up, as vLLM's
# ``prompt_lookup_min``/``prompt_lookup_max``, by default.
PROMPT_LOOKUP_MIN = 2
PROMPT_LOOKUP_MAX = 4
# The draft bound of a request that asks for speculation without one, on a server with it off
# (the bound docs/speculation.md measured).
ASKED_DRAFT_TOKENS = 8


@dataclass(frozen=True)
class Speculative:
    """n-gram speculation's settings: at most ``tokens`` drafted per verify run (0: off),
    drafted from the longest n-gram of ``lookup_min`` to ``lookup_max`` tokens that ends the
    sequence and stood before in it. A request's override leaves ``None`` where the server's
    setting applies (:meth:`over`); one that leaves ``tokens`` out asks for speculation, with
    the server's bound, or :data:`ASKED_DRAFT_TOKENS` where the server has it off."""

    tokens: int | None = None
    lookup_min: int | None = None
    lookup_max: int | None = None

    def over(self, server: Speculative) -> Speculative:
        """This override over the ``server``'s settings, every field set. A lookup bound given
        alone moves the other one where it would cross it (vLLM sets the other one equal)."""
        lo = self.lookup_min if self.lookup_min is not None else server.lookup_min
        hi = self.lookup_max if self.lookup_max is not None else server.lookup_max
        lo, hi = lo or PROMPT_LOOKUP_MIN, hi or PROMPT_LOOKUP_MAX
        if self.lookup_max is None:
            hi = max(hi, lo)
        else:
            lo = min(lo, hi)
        tokens = self.tokens if self.tokens is not None else server.tokens or ASKED_DRAFT_TOKENS
        return Speculative(tokens, lo, hi)

    @property
    def on(self) -> bool:
        """Settings: whether a sequence speculates."""
        return bool(self.tokens)

    @property
    def asks(self) -> bool:
        """An override: whether it asks for speculation (a bound unset, or above 0)."""
        return self.tokens != 0


@dataclass(frozen=True)
class SamplingParams:
    """How to pick tokens. ``temperature == 0`` means greedy decoding.

    ``repetition_penalty`` is the multiplicative (CTRL/HF) penalty the engine applies natively;
    ``presence_penalty``/``frequency_penalty`` are OpenAI's additive ones and ``logit_bias``
    OpenAI's per-token bias, applied to the logits by the scheduler.
    """

    temperature: float = 0.0
    top_p: float = 1.0
    top_k: int = 0  # 0: no top-k cut
    min_p: float = 0.0  # 0: no min-p cut (tokens below min_p × the likeliest's probability)
    seed: int | None = None
    min_new_tokens: int = 0  # EOS is suppressed until this many tokens were generated
    repetition_penalty: float = 1.0
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    logit_bias: Mapping[int, float] | None = None
    logprobs: bool = False  # report the chosen token's log-probability
    top_logprobs: int = 0  # and this many most likely alternatives
    guidance: tuple[GuidanceKind, str] | None = None  # constrained decoding (llguidance)
    call_grammar: CallGrammar | None = None  # tools offered with "auto" (batch scheduler)
    # Beam search (generator scheduler): the n best of ``num_beams`` beams are returned.
    num_beams: int = 1
    length_penalty: float = 1.0
    early_stopping: bool = True
    # n-gram speculation: the request's override of the server's settings (None: theirs).
    speculative: Speculative | None = None

    @property
    def greedy(self) -> bool:
        return self.temperature == 0.0

    @property
    def edits_logits(self) -> bool:
        """Whether each step's logits must be read (and maybe rewritten) in Python, beyond
        the EOS suppression of ``min_new_tokens`` that the engine can do natively."""
        return bool(
            self.presence_penalty
            or self.frequency_penalty
            or self.logit_bias
            or self.logprobs
            or self.top_logprobs
        )


@dataclass(frozen=True, kw_only=True)
class GenerationParams(SamplingParams):
    """One sequence's sampling, with its planned length and the LoRA adapter it runs with."""

    max_new_tokens: int
    adapter: str | None = None


@dataclass(frozen=True)
class Logprob:
    token_id: int
    token: str  # the token's own text
    logprob: float


@dataclass(frozen=True)
class GeneratedToken:
    """One generated token; ``text`` is the decoded piece it completes (may be empty), and
    ``offset`` where that text starts in the sequence's output (set as it is emitted)."""

    token_id: int
    text: str
    logprob: Logprob | None = None  # when logprobs were asked for
    top_logprobs: tuple[Logprob, ...] = ()
    offset: int = 0


@dataclass(frozen=True)
class SequenceDelta:
    """What one sequence adds to its visible output at one step.

    ``text`` is newly visible text: stop strings are already trimmed, and text that could start
    one is held back until it is known not to. ``token`` is the token generated at this step
    (``None`` for the held-back text released when the sequence ends); ``ready`` are the tokens
    whose text became visible with it, for logprobs.
    """

    text: str
    token: GeneratedToken | None
    ready: tuple[GeneratedToken, ...] = ()


@dataclass
class PrefixStoreStats:
    """The batch engine's host-RAM prefix store, as counted on the owner thread (read
    elsewhere as a snapshot: ``dataclasses.replace``)."""

    hits: int = 0  # prompts that restored blocks from the store
    misses: int = 0  # prompts of a block or more the store had nothing to add to
    restored_tokens: int = 0  # prompt tokens restored from the store
    evictions: int = 0  # blocks dropped to stay within the capacity
    bytes: int = 0  # bytes of KV held
    blocks: int = 0  # blocks held
    capacity_bytes: int = 0


@dataclass(frozen=True)
class EngineTime:
    """What a model's owner thread spent in scheduler steps since it loaded: wall-clock
    seconds, the thread's own CPU seconds (onnxruntime's other intra-op threads are not
    counted: with one intra-op thread, the thread runs the model itself, so this is all of
    the model's compute and our Python around it) and steps."""

    busy_seconds: float = 0.0
    cpu_seconds: float = 0.0
    steps: int = 0

    def after(self, busy: float, cpu: float) -> EngineTime:
        return EngineTime(self.busy_seconds + busy, self.cpu_seconds + cpu, self.steps + 1)


@dataclass(frozen=True)
class KVUsage:
    """How much of a model's KV cache its running sequences hold, as its strategy counts it
    on the owner thread after each step (docs/deployment.md, "Routing across replicas", says
    what each strategy counts). ``block_tokens`` is the block the KV events and the prefix
    store cut prompts into."""

    held_tokens: int = 0
    capacity_tokens: int = 0
    block_tokens: int = KV_BLOCK_TOKENS

    @property
    def fraction(self) -> float:
        """Held ÷ capacity, from 0 to 1 (0 while nothing is known)."""
        if self.capacity_tokens <= 0:
            return 0.0
        return min(1.0, self.held_tokens / self.capacity_tokens)

    def __add__(self, other: KVUsage) -> KVUsage:
        return KVUsage(
            self.held_tokens + other.held_tokens,
            self.capacity_tokens + other.capacity_tokens,
            self.block_tokens,
        )


@dataclass(frozen=True)
class Usage:
    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int = 0  # prompt tokens whose KV cache was reused
    image_tokens: int = 0  # prompt tokens that stand for images (part of prompt_tokens)
    # n-gram speculation: tokens drafted and verified, those taken, and the verify runs
    drafted_tokens: int = 0
    accepted_tokens: int = 0
    verify_runs: int = 0


@dataclass(frozen=True)
class StartEvent:
    """The sequence left the queue for a slot; sent before any of its tokens, so a sequence
    that produced a token is always seen as running."""


@dataclass(frozen=True)
class FinishEvent:
    reason: FinishReason
    usage: Usage
    error: str | None = None
    queue_time: float = 0.0  # seconds between submission and the start of prefill
    stop_sequence: str | None = None  # the stop string that ended it, if one did


@dataclass(frozen=True)
class ImageInput:
    """One image of a chat, decoded and checked (:mod:`backends.media`): ``data`` is what the
    model's processor reads (a PNG of the decoded pixels), ``digest`` the SHA-256 of the bytes
    the client sent, ``param`` where the client put it (for error messages)."""

    data: bytes = field(repr=False)
    digest: str
    param: str
    width: int
    height: int
    source_bytes: int  # size of what the client sent (or the server fetched)


@dataclass(frozen=True)
class ImageSource:
    """An image part as a door found it, not yet loaded: inline bytes, base64 text, or a URL
    (a ``data:`` URL's bytes are read by the door's loader, a remote one fetched)."""

    param: str
    data: bytes | None = field(default=None, repr=False)
    url: str | None = None
    b64: str | None = field(default=None, repr=False)  # base64 bytes as sent (Ollama's images)


@dataclass(frozen=True)
class Transcript:
    """What a model read and wrote for one earlier turn: the rendered prompt's text followed by
    the generated tokens' text, and the tokens themselves (the prompt's, then the generated
    ones). ``model`` is the name it was served under (token ids mean nothing to another
    tokenizer); ``messages`` how many of a later chat's messages it covers (the earlier turn's
    messages and its answer)."""

    model: str
    text: str
    token_ids: tuple[int, ...] = field(repr=False)
    messages: int = 0


@dataclass(frozen=True)
class ChatPrompt:
    """Chat messages, rendered with the model's chat template.

    A message's content may be a list of parts; an image part is ``{"type": "image"}`` (as
    Hugging Face templates expect) and ``images`` holds the images in the order their parts
    appear across the messages: sources from a door, loaded images once the door has
    fetched and decoded them."""

    messages: Sequence[Mapping[str, Any]]
    tools: Sequence[Mapping[str, Any]] | None = None  # passed to the template
    template_args: Mapping[str, Any] | None = None  # extra template variables
    images: Sequence[ImageInput | ImageSource] = ()
    # The earlier turn this chat continues: when the rendered text starts with its text, the
    # prompt starts with its tokens exactly (the model's own, as it wrote them), and only the
    # rest is tokenized; otherwise the chat is tokenized whole.
    continues: Transcript | None = None


@dataclass(frozen=True)
class TextPrompt:
    """Raw text, continued as it is (no template)."""

    text: str


@dataclass(frozen=True)
class TokenPrompt:
    """Token ids, fed to the model as they are (no template, no tokenizer): what a client that
    tokenized itself sends, or what a render route returned."""

    ids: tuple[int, ...]


Prompt = ChatPrompt | TextPrompt | TokenPrompt


@dataclass
class PreparedPrompt:
    """A rendered, tokenized prompt; with images, ``media`` holds the model processor's
    inputs (pixels, grids) and ``image_tokens`` how many of ``token_ids`` stand for them."""

    text: str
    token_ids: list[int] = field(repr=False)
    media: Any = field(default=None, repr=False)
    image_tokens: int = 0
    image_digests: tuple[str, ...] = ()

    def __len__(self) -> int:
        return len(self.token_ids)
