"""Per-request timing (TTFT, TPOT, tokens/s)."""
