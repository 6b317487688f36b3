"""GraphQL over websockets at ``/api/copilotkit``: subscriptions (and operations) on Channels.

Both protocols are served: ``graphql-transport-ws`` (npm ``graphql-ws``) and the legacy
``graphql-ws`` (npm ``subscriptions-transport-ws``). The pieces, outermost first:

- ``origins``: the handshake's ``Origin`` is checked (same origin, no Origin, or the runtime's
  ``CORS_ALLOWED_ORIGINS``); other origins are refused before the socket opens;
- ``limits``: the per-process bounds on open sockets and on sockets awaiting
  ``connection_init``; a socket over either is closed at once (4503, with the reason);
- Channels' ``AuthMiddlewareStack``: the Django session, if the handshake carries its cookie;
- ``consumer``: strawberry's consumer, whose ``connection_init`` may carry a bearer token
  (``auth``), with handlers (``handlers``) that format errors as the HTTP endpoint does and
  tell a client's explicit stop from a dropped connection.

``routing.websocket_application()`` assembles them for ``copilot_runtime.site.asgi``.
"""
