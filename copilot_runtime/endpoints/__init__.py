"""The runtime's front doors: one URL for both CopilotKit protocols, the hot path served in front
of Django's handler, GraphQL over HTTP and the health checks.

The HTTP primitives they share with the layers below (bodies, responses, CORS) are
``copilot_runtime.http``.
"""
