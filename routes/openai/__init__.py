"""OpenAI's API: chat completions, completions and models."""
