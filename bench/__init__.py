"""Benchmarks: the server side by side with the raw onnxruntime-genai loop and with peers.

Run ``python -m bench run`` (full) or ``python -m bench run --smoke`` (CI); see docs/benchmarks.md.
"""
