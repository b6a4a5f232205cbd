"""HTTP routes, one module per feature. Routes validate, call the service, pick JSON or SSE."""
