"""Everything below the HTTP doors: no FastAPI, no HTTP schemas, no settings, no metrics.

- ``core/``: request in, handle out. A door builds a :class:`backends.core.request.
  GenerationRequest`, calls ``ModelRegistry.submit`` (one ``InferenceService`` per model) and
  reads the ``ChoiceDelta`` s of the :class:`backends.core.handle.RequestHandle` it gets back.
- ``engine/``: the model's owner thread, its scheduler and the strategies that run sequences.
- ``chat/``: messages to a prompt, and output text to content, thinking and tool calls.
- ``models/``: a folder on disk to a loaded model (variants, inferred configs, providers).
- ``types.py``, ``errors.py``, ``config.py``: the vocabulary every layer shares.

docs/architecture.md follows one request through them.
"""
