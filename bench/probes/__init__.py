"""One-off probes, each run as ``python -m bench.probes.<name>``: a question about the engine or
the server answered with a measurement (seeds, memory, /metrics latency, KV bytes, profiles)."""
