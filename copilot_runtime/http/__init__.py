"""HTTP primitives: reading a request body, the runtime's JSON responses, CORS, static files and
the ASGI-only refusal. The endpoints built on them are ``copilot_runtime.endpoints``."""
