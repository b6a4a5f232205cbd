"""Probe a running server from outside, for scripts/container-check.sh and the runtime-only
install test (tests/test_runtime_install.py).

    python3 scripts/container_probe.py routes http://127.0.0.1:PORT [--page]
    python3 scripts/container_probe.py drain http://127.0.0.1:PORT -- podman stop -t 30 NAME

``routes`` calls every operation the server lists in its own ``/openapi.json`` (so a new route
is probed without editing this file), plus the playground at ``/`` with ``--page``. Routes it
knows get a real request and a check of the answer; streaming ones are called both ways and
must end with their protocol's final event. A route it does not know is called with an empty
body and must answer in its door's error shape (Ollama's own on ``/api/``), never with a 5xx
and never with a 404 (the route is documented); a path parameter gets an id that does not
exist (404), except the model id of ``GET /v1/models/{model_id}``.

``drain`` starts long streams, runs the stop command once each has its first event, and checks
that the server turned ``/readyz`` to draining while they ran and that every stream still
ended with its normal final event. The container's exit status is the caller's to check.

Standard library only: it runs under any python3 (3.10+), no virtual environment needed.
"""

from __future__ import annotations

import argparse
import http.client
import json
import subprocess
import sys
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

TOKENS = 16  # per answer in `routes`: enough for every door's minimum, quick on any model
# Server-sent events (every door but Ollama's) and Ollama's newline-delimited JSON.
STREAM_TYPES = ("text/event-stream", "application/x-ndjson")


@dataclass(frozen=True)
class Event:
    name: str  # the `event:` field; "" for a plain `data:` event
    data: str


@dataclass
class Reply:
    status: int
    content_type: str
    body: bytes = b""
    events: list[Event] = field(default_factory=list)

    @property
    def streamed(self) -> bool:
        return self.content_type.startswith(STREAM_TYPES)

    def json(self) -> Any:
        return json.loads(self.body)


def read_events(lines: Iterator[bytes]) -> Iterator[Event]:
    """Server-sent events from a response's lines (either line ending; comments skipped)."""
    name, data = "", list[str]()
    for raw in lines:
        line = raw.decode().rstrip("\r\n")
        if not line:
            if data:
                yield Event(name, "\n".join(data))
            name, data = "", []
        elif line.startswith(":"):
            continue
        else:
            key, _, value = line.partition(":")
            value = value.removeprefix(" ")
            if key == "event":
                name = value
            elif key == "data":
                data.append(value)
    if data:
        yield Event(name, "\n".join(data))


class Server:
    def __init__(self, base: str, timeout: float = 120) -> None:
        parsed = urllib.parse.urlsplit(base)
        self.host, self.port = parsed.hostname or "127.0.0.1", parsed.port or 80
        self.timeout = timeout

    def call(
        self,
        method: str,
        path: str,
        body: Any = None,
        on_event: Callable[[Event], None] | None = None,
    ) -> Reply:
        conn = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)
        try:
            data = None if body is None else json.dumps(body).encode()
            headers = {"Content-Type": "application/json"} if data is not None else {}
            conn.request(method, path, body=data, headers=headers)
            resp = conn.getresponse()
            reply = Reply(resp.status, resp.getheader("Content-Type") or "")
            if not reply.streamed:
                reply.body = resp.read()
                return reply
            lines = iter(resp.readline, b"")
            events: Iterator[Event] = read_events(lines)
            if reply.content_type.startswith("application/x-ndjson"):  # a line is an event
                events = (Event("", line.decode().strip()) for line in lines if line.strip())
            for event in events:
                reply.events.append(event)
                if on_event is not None:
                    on_event(event)
            return reply
        finally:
            conn.close()


# What each known door's answer must hold, and its stream's final event.
Check = Callable[[Any], bool]


@dataclass(frozen=True)
class Door:
    body: Callable[[str], dict[str, Any]]  # the model id -> a request body
    answer: Check  # the JSON answer
    final: Check | None = None  # the last SSE event (an Event); None: no stream
    stream_flag: bool = True  # False: the route always streams (no "stream" field)


def _hi(model: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": "hi"}]


def _data(event: Event) -> Any:
    return json.loads(event.data)


DOORS: dict[str, Door] = {
    "/v1/chat": Door(
        lambda m: {"messages": _hi(m), "max_tokens": TOKENS},
        lambda a: isinstance(a.get("content"), str) and "metrics" in a,
    ),
    "/v1/chat/stream": Door(
        lambda m: {"messages": _hi(m), "max_tokens": TOKENS},
        lambda a: True,
        final=lambda e: _data(e).get("done") is True,
        stream_flag=False,
    ),
    "/v1/chat/completions": Door(
        lambda m: {"model": m, "messages": _hi(m), "max_tokens": TOKENS},
        lambda a: a["object"] == "chat.completion" and "message" in a["choices"][0],
        final=lambda e: e.data == "[DONE]",
    ),
    "/v1/completions": Door(
        lambda m: {"model": m, "prompt": "Hello", "max_tokens": TOKENS},
        lambda a: a["object"] == "text_completion" and isinstance(a["choices"][0]["text"], str),
        final=lambda e: e.data == "[DONE]",
    ),
    "/generate": Door(
        lambda m: {"prompt": "Hello", "max_new_tokens": TOKENS},
        lambda a: isinstance(a.get("generated_text"), str),
    ),
    "/v1/responses": Door(
        lambda m: {"model": m, "input": "hi", "max_output_tokens": TOKENS},
        lambda a: a["object"] == "response" and a["status"] in ("completed", "incomplete"),
        final=lambda e: e.name in ("response.completed", "response.incomplete"),
    ),
    "/v1/messages": Door(
        lambda m: {"model": m, "messages": _hi(m), "max_tokens": TOKENS},
        lambda a: a["type"] == "message" and isinstance(a["content"], list),
        final=lambda e: e.name == "message_stop",
    ),
    "/v1/messages/count_tokens": Door(
        lambda m: {"model": m, "messages": _hi(m)},
        lambda a: isinstance(a.get("input_tokens"), int),
    ),
    "/tokenize": Door(lambda m: {"prompt": "Hello"}, lambda a: isinstance(a.get("tokens"), list)),
    "/detokenize": Door(
        lambda m: {"tokens": [1, 2, 3]}, lambda a: isinstance(a.get("prompt"), str)
    ),
    "/apply-template": Door(
        lambda m: {"messages": _hi(m)}, lambda a: isinstance(a.get("prompt"), str)
    ),
    # Ollama's doors stream unless told not to.
    "/api/chat": Door(
        lambda m: {"model": m, "messages": _hi(m), "stream": False, "options": {"num_predict": 8}},
        lambda a: a.get("done") is True and isinstance(a["message"]["content"], str),
        final=lambda e: _data(e).get("done") is True,
    ),
    "/api/generate": Door(
        lambda m: {"model": m, "prompt": "Hello", "stream": False, "options": {"num_predict": 8}},
        lambda a: a.get("done") is True and isinstance(a.get("response"), str),
        final=lambda e: _data(e).get("done") is True,
    ),
    "/api/show": Door(lambda m: {"model": m}, lambda a: isinstance(a.get("details"), dict)),
    "/admin/profiling": Door(
        lambda m: {"enabled": True, "steps": 1}, lambda a: a.get("enabled") is True
    ),
}
AFTER = {"/admin/profiling": {"enabled": False}}  # undo what a probe turned on


def is_error_shape(reply: Reply, path: str) -> bool:
    """OpenAI's ``{"error": {"message": ...}}`` (Anthropic's adds a type around it), or on
    Ollama's doors (``/api/``) Ollama's own ``{"error": "..."}``."""
    try:
        error = reply.json().get("error")
    except (ValueError, AttributeError):
        return False
    if path.startswith("/api/") and isinstance(error, str):
        return bool(error)
    return isinstance(error, dict) and isinstance(error.get("message"), str)


def admin_off(reply: Reply) -> bool:
    """The admin routes' documented refusal while they are off (no GENAI_API_KEY, no
    GENAI_ADMIN): a 403 in the error shape, code ``admin_disabled``. The route is there, and
    says why it does not serve."""
    if reply.status != 403:
        return False
    try:
        error = reply.json().get("error")
    except (ValueError, AttributeError):
        return False
    return isinstance(error, dict) and error.get("code") == "admin_disabled"


class Report:
    def __init__(self) -> None:
        self.failures = 0
        self.count = 0

    def __call__(self, ok: bool, what: str, detail: str) -> None:
        self.count += 1
        self.failures += not ok
        print(f"  {'ok  ' if ok else 'FAIL'} {what:<44} {detail}", flush=True)


def probe_door(server: Server, report: Report, path: str, door: Door, model: str) -> None:
    if door.final is None:
        streams = [False]
    else:
        streams = [False, True] if door.stream_flag else [True]
    for stream in streams:
        body = door.body(model)
        if stream and door.stream_flag:
            body["stream"] = True
        what = f"POST {path}" + (" (stream)" if stream else "")
        started = time.perf_counter()
        try:
            reply = server.call("POST", path, body)
        except OSError as exc:
            report(False, what, f"no answer: {exc}")
            continue
        took = f"{(time.perf_counter() - started) * 1000:.0f} ms"
        if admin_off(reply):
            report(True, what, "403 admin_disabled (the admin routes are off)")
            return
        if reply.status != 200:
            report(False, what, f"{reply.status}: {reply.body[:300]!r}")
        elif stream != reply.streamed:
            report(False, what, f"content type {reply.content_type}")
        elif stream:
            if not reply.events:
                report(False, what, "200 but no events")
                continue
            errors = [e for e in reply.events if e.name == "error" or '"error"' in e.data[:12]]
            last = reply.events[-1]
            ok = not errors and door.final is not None and door.final(last)
            final = last.name or last.data[:40]
            report(ok, what, f"200 stream, {len(reply.events)} events, last {final!r}, {took}")
        else:
            try:
                ok = door.answer(reply.json())
            except (ValueError, KeyError, IndexError, TypeError):
                ok = False
            report(ok, what, f"200 JSON, {took}" if ok else f"200 unexpected: {reply.body[:200]!r}")
    if path in AFTER:
        server.call("POST", path, AFTER[path])


def probe_routes(server: Server, page: bool) -> int:
    report = Report()
    spec = server.call("GET", "/openapi.json").json()
    models = server.call("GET", "/v1/models").json()["data"]
    model = models[0]["id"]
    print(f"routes from /openapi.json ({len(spec['paths'])} paths), model {model!r}:")
    if page:
        reply = server.call("GET", "/")
        ok = reply.status == 200 and reply.content_type.startswith("text/html")
        report(ok, "GET / (the playground)", f"{reply.status} {reply.content_type}")
    for path, operations in spec["paths"].items():
        for method in operations:
            method = method.upper()
            if method == "GET":
                concrete = path.replace("{model_id}", urllib.parse.quote(model))
                concrete = _fill(concrete, "no-such-id")
                reply = server.call("GET", concrete)
                ok = reply.status == 200 or (concrete != path and reply.status == 404)
                ok = ok or admin_off(reply)
                report(ok, f"GET {concrete}", f"{reply.status} {reply.content_type}")
            elif method == "POST" and path in DOORS:
                probe_door(server, report, path, DOORS[path], model)
            else:
                # Unknown to this probe (or addressed by an id): an empty body or a missing id
                # must be refused in the error shape, which proves the route is wired.
                concrete = _fill(path, "no-such-id")
                reply = server.call(method, concrete, {} if method != "DELETE" else None)
                # A 404 is right only for the made-up id; else the route is not there.
                missing = reply.status == 404 and concrete == path
                ok = 400 <= reply.status < 500 and is_error_shape(reply, path) and not missing
                report(
                    ok,
                    f"{method} {concrete}",
                    f"{reply.status} error shape (empty body / unknown id)",
                )
    print(f"{report.count - report.failures}/{report.count} route checks passed")
    return 1 if report.failures else 0


def _fill(path: str, value: str) -> str:
    while "{" in path:
        start = path.index("{")
        path = path[:start] + value + path[path.index("}", start) + 1 :]
    return path


LONG = {
    "messages": [{"role": "user", "content": "go on"}],
    "max_tokens": 1900,
    "min_tokens": 1900,
    "temperature": 0,
    "stream": True,
}


def probe_drain(server: Server, stop: list[str], streams: int = 3) -> int:
    """Long streams; the stop command once each has begun; each must still end normally."""
    started = threading.Barrier(streams + 1, timeout=60)
    replies: list[Reply | BaseException | None] = [None] * streams

    def run(i: int) -> None:
        seen = False

        def first(_: Event) -> None:
            nonlocal seen
            if not seen:
                seen = True
                started.wait()

        try:
            replies[i] = server.call("POST", "/v1/chat/completions", LONG, on_event=first)
        except BaseException as exc:  # reported below, with the other streams' outcomes
            replies[i] = exc
            started.abort()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(streams)]
    for t in threads:
        t.start()
    started.wait()
    print(f"{streams} streams of {LONG['max_tokens']} tokens begun; running: {' '.join(stop)}")
    stopper = subprocess.Popen(stop, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    draining = False
    while not draining and any(t.is_alive() for t in threads):
        try:
            ready = server.call("GET", "/readyz")
            draining = ready.status == 503 and ready.json().get("status") == "draining"
        except OSError:
            break
        time.sleep(0.02)
    live = sum(t.is_alive() for t in threads)
    for t in threads:
        t.join(120)
    out, _ = stopper.communicate(timeout=120)
    ok = draining and live > 0
    print(
        f"  {'ok  ' if ok else 'FAIL'} SIGTERM while streaming: /readyz "
        f"{'503 draining' if draining else 'never draining'} with {live} stream(s) running"
    )
    for i, reply in enumerate(replies):
        if not isinstance(reply, Reply):
            ok = False
            print(f"  FAIL stream {i}: {reply!r}")
            continue
        chunks = [_data(e) for e in reply.events if e.data != "[DONE]"]
        finish = [
            c["finish_reason"]
            for k in chunks
            for c in k.get("choices", [])
            if c.get("finish_reason")
        ]
        last = reply.events[-1].data if reply.events else None
        done = last == "[DONE]" and finish == ["length"]
        ok &= done
        print(
            f"  {'ok  ' if done else 'FAIL'} stream {i}: {len(chunks)} chunks, "
            f"finish_reason {finish}, last event {last!r}"
        )
    print(f"  stop command: exit {stopper.returncode} {out.strip()}")
    return 0 if ok and stopper.returncode == 0 else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("check", choices=["routes", "drain"])
    parser.add_argument("base", help="the server's base URL, e.g. http://127.0.0.1:8002")
    parser.add_argument("--page", action="store_true", help="also GET / (the playground)")
    parser.add_argument("stop", nargs="*", help="drain: the command that stops the server")
    args = parser.parse_args(argv)
    server = Server(args.base)
    if args.check == "routes":
        return probe_routes(server, args.page)
    if not args.stop:
        parser.error("drain needs the stop command after --")
    return probe_drain(server, args.stop)


if __name__ == "__main__":
    sys.exit(main())
