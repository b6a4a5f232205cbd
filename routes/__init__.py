"""HTTP routes, one module per feature. Routes validate, call the models, pick JSON or SSE."""
