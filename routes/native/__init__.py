"""The native API: /healthz, /v1/chat, /v1/chat/stream and /generate."""
