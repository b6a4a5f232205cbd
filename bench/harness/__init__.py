"""The harness every benchmark runs on: server processes, the load generator and its clients,
the machine's description, prompts of a given length, and the benchmark model folders."""
