"""Pydantic models of the wire: HTTP request/response bodies, the error shape."""
