"""The HTTP surface of the runtime: one endpoint, health checks, auth, CORS."""
