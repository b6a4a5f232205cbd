"""Pydantic models: settings, HTTP request/response bodies, the error shape."""
