"""Ollama's native API (/api/*): router.py (HTTP), serving.py (chat and generate over the
core), models.py (the model listings), errors.py (its error shape)."""
