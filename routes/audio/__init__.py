"""OpenAI's /v1/audio/transcriptions over the speech services (router.py: HTTP; serving.py:
the protocol, FastAPI-free)."""
