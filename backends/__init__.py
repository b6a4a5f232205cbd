"""The generation core: one request type, one ``submit`` call, the owner thread and its
scheduling strategies, model loading and execution-provider choice.

Nothing here imports FastAPI or the HTTP schemas: the doors (the HTTP routes, the in-process
client) build a :class:`backends.core.request.GenerationRequest` and read the pieces of the
:class:`backends.core.handle.RequestHandle` that ``InferenceService.submit`` returns.
"""
