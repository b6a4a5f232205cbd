"""What ``InferenceService.submit`` returns: one request's choices, as the asyncio side sees them.

Events arrive from the owner thread through ``call_soon_threadsafe`` into one queue per request,
so the ``n`` choices of a request merge in the order they were made, with no task per choice.
Timing is taken when the event loop receives an event, so it does not depend on how fast (or
whether) a door consumes the deltas.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field

from backends.chat.formats import ChatFormat
from backends.chat.output import CallDelta, ChatOutput, OutputDelta, ToolCallResult
from backends.chat.parsers import CUT, FailedCall
from backends.core.owner import current_owner
from backends.core.request import GenerationRequest
from backends.core.timing import RequestMetrics, RequestTimer
from backends.errors import (
    GenAIError,
    GenerationFailed,
    GrammarFailed,
    RequestCancelled,
    RequestTimedOut,
    ShuttingDown,
)
from backends.types import (
    CancelCause,
    ChoiceFinish,
    FinishEvent,
    FinishReason,
    GeneratedToken,
    PreparedPrompt,
    SamplingParams,
    SequenceDelta,
    StartEvent,
    Transcript,
    Usage,
)

# The ends a door is told as a finish reason; the others are raised (Choice.server_ended).
_DOOR_REASONS: dict[FinishReason, ChoiceFinish] = {
    "stop": "stop",
    "length": "length",
    "cancelled": "cancelled",
}


@dataclass(frozen=True)
class ChoiceDelta:
    """What a choice adds to its output: newly visible text, the tokens it completes, and on
    each choice's last delta its ``finish_reason``.

    With a chat format (tools offered, or thinking reported apart), ``text`` is the answer
    only, ``reasoning`` the model's thinking and ``calls`` its tool calls as they are read;
    the last delta's ``failed_calls`` are the calls a grammar held that the output ended
    inside (their text is in none of the others)."""

    index: int  # prompt index × n + i
    text: str
    token: GeneratedToken | None = None  # the token generated at this step, if one was
    tokens: tuple[GeneratedToken, ...] = ()  # tokens whose text is now visible (for logprobs)
    finish_reason: ChoiceFinish | None = None
    stop_sequence: str | None = None  # with a "stop" finish: the stop string that ended it
    last: bool = False  # the request's last delta: every choice has finished
    reasoning: str = ""
    calls: tuple[CallDelta, ...] = ()
    failed_calls: tuple[FailedCall, ...] = ()


@dataclass
class ChoiceResult:
    index: int
    text: str = ""
    tokens: list[GeneratedToken] = field(default_factory=list)
    finish_reason: ChoiceFinish = "stop"
    stop_sequence: str | None = None
    completion_tokens: int = 0
    reasoning: str = ""
    tool_calls: list[ToolCallResult] = field(default_factory=list)
    failed_calls: list[FailedCall] = field(default_factory=list)


@dataclass(frozen=True)
class Result:
    choices: list[ChoiceResult]
    usage: Usage
    metrics: RequestMetrics


@dataclass(frozen=True)
class FinishedChoice:
    """Handed to the observer once a choice ended (metrics, the request log line)."""

    id: str
    finish: FinishEvent
    metrics: RequestMetrics


@dataclass
class Choice:
    """One sequence of a request, on the asyncio side."""

    id: str  # the job's id: the request id, with ".index" when there are several
    index: int
    prompt_index: int
    cancelled: threading.Event = field(default_factory=threading.Event)
    cause: CancelCause | None = None  # who cancelled it, if anyone did
    generated: int = 0
    running: bool = False  # it got a slot (before its first token), as the owner thread said
    finish: FinishEvent | None = None

    def cancel(self, cause: CancelCause) -> None:
        if self.cause is None:
            self.cause = cause
        self.cancelled.set()

    def server_ended(self) -> GenAIError | None:
        """The error for an end the server imposed (honest endings: never a normal finish)."""
        assert self.finish is not None
        made = f"after {self.generated} of its tokens"
        if self.finish.reason == "error":
            return GenerationFailed(f"Generation failed: {self.finish.error}")
        if self.finish.reason == "grammar_error":
            return GrammarFailed(
                f"The request's grammar (a JSON schema, forced tool calls or guidance) failed "
                f"during generation, {made}: {self.finish.error}"
            )
        if self.finish.reason == "timeout":
            return RequestTimedOut(f"The request exceeded GENAI_REQUEST_TIMEOUT, {made}.")
        if self.finish.reason != "cancelled" or self.cause == "client":
            return None
        if self.cause == "admin":
            return RequestCancelled(f"An administrator cancelled the request, {made}.")
        return ShuttingDown(f"The server shut down before the request finished, {made}.")


class RequestHandle:
    """Iterate for :class:`ChoiceDelta` s (or ``await result()``); ``cancel()`` stops every choice.

    Leaving the iteration early cancels the request, so a door whose client went away stops
    its generation just by not reading on. A choice the server ended (GENAI_REQUEST_TIMEOUT,
    an operator's cancel, a shutdown) raises the error saying so, on every door alike: it is
    never passed off as a normal finish."""

    def __init__(
        self,
        request_id: str,
        model: str,
        choices: list[Choice],
        timer: RequestTimer,
        on_token: Callable[[float | None], None] = lambda gap: None,
        on_finish: Callable[[Choice, FinishedChoice], None] = lambda c, f: None,
        output_format: ChatFormat | None = None,
        *,
        sampling: SamplingParams | None = None,
        calls_held: bool = False,
        on_failed_calls: Callable[[int], None] = lambda count: None,
    ) -> None:
        self.id = request_id
        self.model = model
        self.owner = current_owner()  # whose it is: the request's it was opened for
        self.choices = choices
        self.prompts: list[PreparedPrompt] = []  # set once the owner thread tokenized them
        self.token_limits: list[int] = []  # each choice's max new tokens, set with the prompts
        self.created = int(time.time())
        # The sampling the choices run with, the model's defaults filled in (Responses echoes it).
        self.sampling = sampling or SamplingParams()
        self._timer = timer
        self._on_token = on_token
        self._on_finish = on_finish
        self._loop = asyncio.get_running_loop()
        self._queue: asyncio.Queue[tuple[Choice, SequenceDelta | FinishEvent]] = asyncio.Queue()
        self._metrics: RequestMetrics | None = None
        self._unread = len(choices)  # choices whose last piece the door has not read yet
        self._format = output_format  # how to split the output: calls, thinking
        self._calls_held = calls_held  # a grammar holds the calls (GenerationRequest.calls_held)
        self._on_failed_calls = on_failed_calls
        self._outputs: dict[int, ChatOutput] = {}
        self._written: dict[int, list[GeneratedToken]] = {}  # each choice's tokens, as read

    # ---- the owner thread's side ---------------------------------------------------------
    def sink(self, choice: Choice) -> Callable[[SequenceDelta | FinishEvent | StartEvent], None]:
        def deliver(event: SequenceDelta | FinishEvent | StartEvent) -> None:
            try:
                self._loop.call_soon_threadsafe(self._receive, choice, event)
            except RuntimeError:  # loop closed: nobody is listening any more
                pass

        return deliver

    def _receive(self, choice: Choice, event: SequenceDelta | FinishEvent | StartEvent) -> None:
        if isinstance(event, StartEvent):
            choice.running = True
            return
        if isinstance(event, FinishEvent):
            choice.finish = event
            if self.finished:
                self._metrics = self._timer.finish(self.prompt_tokens)
            self._on_finish(choice, FinishedChoice(choice.id, event, self.metrics()))
        elif event.token is not None:
            choice.generated += 1
            self._timer.token()
            self._on_token(self._timer.last_gap)
        self._queue.put_nowait((choice, event))

    # ---- the door's side -----------------------------------------------------------------
    @property
    def accepted(self) -> float:
        """When the request was accepted (``time.perf_counter()``)."""
        return self._timer.accepted

    @property
    def finished(self) -> bool:
        return all(c.finish is not None for c in self.choices)

    @property
    def prompt_tokens(self) -> int:
        return sum(len(p) for p in self.prompts)

    def cancel(self) -> None:
        """Stop every choice (the door's own doing: its client left, or it has enough)."""
        for choice in self.choices:
            choice.cancel("client")

    async def __aiter__(self) -> AsyncIterator[ChoiceDelta]:
        try:
            while self._unread:
                choice, event = await self._queue.get()
                output = self._output(choice)
                if isinstance(event, SequenceDelta):
                    if event.token is not None:
                        self._written.setdefault(choice.index, []).append(event.token)
                    split = output.feed(event.text) if output else OutputDelta(event.text)
                    yield ChoiceDelta(
                        choice.index,
                        split.content,
                        event.token,
                        event.ready,
                        reasoning=split.reasoning,
                        calls=split.calls,
                    )
                    continue
                self._unread -= 1
                error = choice.server_ended()
                if error is not None:
                    raise error
                reason = _DOOR_REASONS[event.reason]
                split = output.finish(self._cut_reason(choice, event)) if output else OutputDelta()
                if split.failed:
                    self._on_failed_calls(len(split.failed))
                if output is not None and output.calls and reason == "stop":
                    reason = "tool_calls"
                yield ChoiceDelta(
                    choice.index,
                    split.content,
                    finish_reason=reason,
                    stop_sequence=event.stop_sequence if reason == "stop" else None,
                    last=not self._unread,
                    reasoning=split.reasoning,
                    calls=split.calls,
                    failed_calls=split.failed,
                )
        finally:
            self.cancel()

    def _output(self, choice: Choice) -> ChatOutput | None:
        chat_format = self._format
        if chat_format is None:
            return None
        if choice.index not in self._outputs:
            prompt = self.prompts[choice.prompt_index].text if self.prompts else ""
            reasoning = chat_format.reasoning
            opened = reasoning is not None and reasoning.opened_by(prompt)
            self._outputs[choice.index] = ChatOutput(
                chat_format.tools, reasoning, opened, calls_held=self._calls_held
            )
        return self._outputs[choice.index]

    def _cut_reason(self, choice: Choice, finish: FinishEvent) -> str:
        """Why a held call the output ended inside failed: the bound is the request's room,
        the most tokens it may generate (its max_tokens, within the context)."""
        if finish.reason == "length":
            limits = self.token_limits
            room = f"the {limits[choice.index]} tokens" if limits else "the tokens"
            return f"the call did not fit in {room} the request may generate"
        if finish.stop_sequence is not None:
            return f"the stop string {finish.stop_sequence!r} ended the output inside the call"
        return CUT

    async def result(self) -> Result:
        """Run every choice to its end."""
        results = {c.index: ChoiceResult(c.index) for c in self.choices}
        texts: dict[int, list[str]] = {c.index: [] for c in self.choices}
        thoughts: dict[int, list[str]] = {c.index: [] for c in self.choices}
        async for delta in self:
            texts[delta.index].append(delta.text)
            thoughts[delta.index].append(delta.reasoning)
            results[delta.index].tokens.extend(delta.tokens)
            if delta.finish_reason is not None:
                results[delta.index].finish_reason = delta.finish_reason
                results[delta.index].stop_sequence = delta.stop_sequence
        for choice in self.choices:
            result = results[choice.index]
            result.text = "".join(texts[choice.index])
            result.reasoning = "".join(thoughts[choice.index])
            output = self._outputs.get(choice.index)
            result.tool_calls = [output.calls[i] for i in sorted(output.calls)] if output else []
            result.failed_calls = list(output.failed) if output else []
            result.completion_tokens = choice.generated
        return Result(sorted(results.values(), key=lambda r: r.index), self.usage(), self.metrics())

    def usage(self) -> Usage:
        """Totals over every prompt and choice; a prompt's cached tokens count once. (n-gram
        speculation's counts are those of the choices that ended.)"""
        cached: dict[int, int] = {}
        for c in self.choices:
            if c.finish is not None:
                reused = c.finish.usage.cached_tokens
                cached[c.prompt_index] = max(cached.get(c.prompt_index, 0), reused)
        completion = sum(c.generated for c in self.choices)
        images = sum(p.image_tokens for p in self.prompts)
        ended = [c.finish.usage for c in self.choices if c.finish is not None]
        return Usage(
            self.prompt_tokens,
            completion,
            sum(cached.values()),
            images,
            drafted_tokens=sum(u.drafted_tokens for u in ended),
            accepted_tokens=sum(u.accepted_tokens for u in ended),
            verify_runs=sum(u.verify_runs for u in ended),
        )

    def transcript(self, index: int = 0) -> Transcript | None:
        """What choice ``index`` read and wrote so far, for a later turn to continue exactly
        (``ChatPrompt.continues``); None before its prompt was tokenized, and for a prompt
        with images (their tokens stand for pixels a later turn would have to read again)."""
        choice = next((c for c in self.choices if c.index == index), None)
        if choice is None or not self.prompts:
            return None
        prompt = self.prompts[choice.prompt_index]
        if prompt.image_tokens:
            return None
        written = self._written.get(index, [])
        text = prompt.text + "".join(t.text for t in written)
        ids = (*prompt.token_ids, *(t.token_id for t in written))
        return Transcript(self.model, text, ids)

    def queue_time(self) -> float:
        """Seconds the request's sequences waited for a free slot (the longest wait of its
        finished choices), as the owner thread measured it."""
        return max((c.finish.queue_time for c in self.choices if c.finish), default=0.0)

    def metrics(self) -> RequestMetrics:
        """Timing for the whole request, frozen once every choice finished."""
        return self._metrics or self._timer.finish(self.prompt_tokens)


def let_loop_deliver(loop: asyncio.AbstractEventLoop, timeout: float = 0.005) -> None:
    """Block the owner thread until the event loop has passed on the tokens just delivered.

    onnxruntime-genai holds the GIL for a whole model step (a 1 ms sleep in another thread
    woke only after the step ended), so a first token delivered right before the next step
    would wait for that step before the event loop could send it: one decode step added to
    TTFT. Waiting here (which releases the GIL) lets the loop run its callbacks and the woken
    stream writers first. Done for first tokens only: on every token the handshake cost decode
    speed; ``timeout`` bounds the wait if the loop is busy."""
    done = threading.Event()
    try:
        # Two hops: the first runs after the delivery callbacks, the second after the tasks
        # they woke (the SSE writers) got their turn.
        loop.call_soon_threadsafe(loop.call_soon, done.set)
    except RuntimeError:  # loop closed
        return
    done.wait(timeout)


def open_handle(
    request: GenerationRequest,
    base: str,
    model: str,
    on_token: Callable[[float | None], None],
    on_finished: Callable[[Choice, FinishedChoice], None],
    output: ChatFormat | None,
    on_failed_calls: Callable[[int], None] = lambda count: None,
) -> RequestHandle:
    """The handle of every choice of ``request``: ``base`` names it, and its one choice or
    its choices ``base.0``, ``base.1``... (choice ``p × n + i`` is prompt ``p``'s ``i``-th)."""
    count, n = request.choice_count, request.n
    choices = [
        Choice(base if count == 1 else f"{base}.{i}", index=i, prompt_index=i // n)
        for i in range(count)
    ]
    timer = RequestTimer(accepted=request.accepted_at)
    return RequestHandle(
        base,
        model,
        choices,
        timer,
        on_token,
        on_finished,
        output,
        sampling=request.sampling,
        calls_held=request.calls_held,
        on_failed_calls=on_failed_calls,
    )
