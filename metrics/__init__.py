"""Prometheus metrics and the one log line per request: the observer of every model."""
