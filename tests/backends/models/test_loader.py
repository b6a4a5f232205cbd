"""Loading checks that need no model: the intra-op threads."""

from __future__ import annotations

import pytest

from backends.errors import StartupError
from backends.models.loader import check_threads, usable_cpus

pytestmark = pytest.mark.unit


def test_threads_default_to_every_usable_cpu_and_may_be_fewer() -> None:
    assert check_threads(None) == usable_cpus()
    assert check_threads(1) == 1


def test_more_threads_than_cpus_are_refused() -> None:
    # The fuzz tier's find: 2,555 threads took minutes to load (a request timed out).
    with pytest.raises(StartupError, match="GENAI_INTRA_OP_THREADS=2555"):
        check_threads(2555)
