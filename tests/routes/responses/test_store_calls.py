"""The store's calls off the event loop (routes/responses/store.py's StoreCalls) and what is
checked before them (routes/responses/state.py): a call that hangs is a 503 within the
deadline, never a wait for the default thread pool's other users; more calls than it holds are
a 503 at once; an id the store could not hold (a NUL, too long, other characters) is an unknown
one without a round trip, and an error repeats it escaped and cut short."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest

from backends.errors import GenAIError
from routes.responses import state
from routes.responses.sqlite_store import SqliteStore
from routes.responses.store import StoreCalls, StoreLimits, StoreUnavailable
from schemas.responses import ResponsesRequest

pytestmark = pytest.mark.unit

LIMITS = StoreLimits(100, 1 << 20, 60.0)


def test_a_hung_call_is_unavailable_within_the_deadline_and_holds_up_nothing_else() -> None:
    release = threading.Event()
    calls = StoreCalls(threads=2, deadline=0.3, queued=2)

    async def run() -> None:
        start = time.perf_counter()
        hung = [asyncio.create_task(calls(release.wait)) for _ in range(4)]
        await asyncio.sleep(0.05)
        with pytest.raises(StoreUnavailable):  # two run, two wait: no room for a fifth
            await calls(release.wait)
        assert time.perf_counter() - start < 0.2
        # The default pool is free for everything else meanwhile.
        assert await asyncio.to_thread(lambda: 42) == 42
        for task in hung:
            with pytest.raises(StoreUnavailable):
                await task
        assert time.perf_counter() - start < 0.6
        release.set()
        await asyncio.sleep(0.05)
        assert await calls(lambda: "back") == "back", "the room came back"

    try:
        asyncio.run(run())
    finally:
        release.set()
        calls.close()


class Untouchable(SqliteStore):
    def get(self, *args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the store was asked")

    delete = get


BAD_IDS = ["a\x00b", "resp_" + "0" * 200, "x" * 5_000_000, "resp_é", "../resp_1"]


@pytest.mark.parametrize("bad", BAD_IDS, ids=["nul", "long", "5M", "accent", "path"])
def test_an_id_no_response_can_have_is_unknown_without_asking_the_store(bad: str) -> None:
    store = Untouchable(None, LIMITS)

    async def answers() -> list[GenAIError]:
        body = ResponsesRequest.model_validate({"input": "hi", "previous_response_id": bad})
        out = []
        for call in (
            state.stored(store, bad, None),
            state.delete(store, bad, None),
            state.begin(body, store, None),
        ):
            with pytest.raises(GenAIError) as raised:
                await call
            out.append(raised.value)
        return out

    try:
        found, deleted, continued = asyncio.run(answers())
    finally:
        store.close()
    assert found.status_code == deleted.status_code == 404
    assert continued.status_code == 400 and continued.code == "previous_response_not_found"
    for error in (found, deleted, continued):
        assert len(str(error)) < 150 and "\x00" not in str(error)


def test_an_item_id_is_repeated_short() -> None:
    items = [{"id": "msg_1"}]
    with pytest.raises(GenAIError) as raised:
        state.page(items, "asc", 20, "y" * 1_000_000)
    assert len(str(raised.value)) < 150
