"""HTTP plumbing shared by every protocol: auth, body limits, slow clients, request ids, SSE,
errors."""
