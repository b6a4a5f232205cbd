"""The KV cache's tokens per slot from a memory budget."""

from __future__ import annotations

import numpy as np
import pytest

from backends.engine.batch.decoder import DecoderSpec
from backends.engine.batch.kv_cache import capacity_for

pytestmark = pytest.mark.unit

# 2 layers x 2 kv heads x 16 dims x key and value x 4 bytes = 512 bytes a token.
SPEC = DecoderSpec("m", 2, 2, 16, 1024, "i", "a", None, (), (), (), (), "l", np.float32)


def test_a_budget_caps_the_tokens_per_slot() -> None:
    assert capacity_for(SPEC, 4, 2048) == 2048
    assert capacity_for(SPEC, 4, 2048, budget_mib=1.0) == 512  # 1 MiB / (4 x 512 B)
    assert capacity_for(SPEC, 4, 2048, budget_mib=1e-9) == 1


def test_a_budget_too_large_to_count_in_bytes_is_no_cap() -> None:
    # The fuzz tier's find: 8e307 MiB overflowed to inf bytes and int(nan) was a 500.
    assert capacity_for(SPEC, 4, 2048, budget_mib=8.39e307) == 2048
