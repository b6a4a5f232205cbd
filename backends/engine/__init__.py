"""The engine: the owner thread, its scheduler and the strategies that run sequences."""
