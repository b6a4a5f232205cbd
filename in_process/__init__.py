"""The in-process front door: generate from Python without HTTP (OnnxTextGenerator)."""

from in_process.text_generator import OnnxTextGenerator

__all__ = ["OnnxTextGenerator"]
