"""Operations: readiness, Prometheus metrics and the admin routes."""
