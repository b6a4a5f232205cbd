"""OpenAI's Responses API."""
