"""Model loading, execution-provider choice and the generation loop.

Nothing here imports FastAPI or the HTTP schemas: backends exchange the small dataclasses
of :mod:`backends.types` with whatever drives them (the HTTP app, the in-process client).
"""
