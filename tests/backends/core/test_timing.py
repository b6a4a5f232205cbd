from __future__ import annotations

import pytest

from backends.core.timing import RequestTimer, compute_metrics

pytestmark = pytest.mark.unit


class FakeClock:
    def __init__(self, *times: float) -> None:
        self.times = list(times)

    def __call__(self) -> float:
        return self.times.pop(0)


def test_metrics_from_an_injected_clock() -> None:
    # accepted at 10.0, tokens at 10.5, 10.7, 10.9, 11.1, finished at 11.2
    timer = RequestTimer(FakeClock(10.0, 10.5, 10.7, 10.9, 11.1, 11.2))
    for _ in range(4):
        timer.token()
    m = timer.finish(input_tokens=12)
    assert m.ttft == pytest.approx(0.5)
    assert m.total_latency == pytest.approx(1.2)
    assert m.tpot == pytest.approx(0.2)  # (11.1 - 10.5) / 3
    assert m.tokens_per_second == pytest.approx(5.0)
    assert m.output_tokens_per_second == pytest.approx(4 / 1.2)
    assert (m.input_tokens, m.output_tokens) == (12, 4)


def test_single_token_has_no_tpot() -> None:
    m = compute_metrics(accepted=0, first=0.3, last=0.3, end=0.4, input_tokens=1, output_tokens=1)
    assert m.tpot == 0 and m.tokens_per_second == 0
    assert m.ttft == pytest.approx(0.3)


def test_no_token_ttft_is_total() -> None:
    m = compute_metrics(accepted=1, first=None, last=None, end=3, input_tokens=5, output_tokens=0)
    assert m.ttft == 2 and m.output_tokens_per_second == 0


def test_timers_are_independent() -> None:
    a = RequestTimer(FakeClock(0.0, 1.0, 2.0))
    b = RequestTimer(FakeClock(100.0, 100.1, 100.2))
    a.token()
    b.token()
    assert a.finish(1).ttft == pytest.approx(1.0)
    assert b.finish(1).ttft == pytest.approx(0.1)
