"""The core: request in, handle out; the model registry; per-request timing."""
