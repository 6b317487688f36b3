"""CopilotKit v2 ("runtime v2"): AG-UI over REST and SSE, served at ``/api/copilotkit``.

- ``views``: the entry points (REST sub-paths, the single-route envelope), kept thin;
  ``routes`` the route table and methods, ``responses`` the JSON error shapes.
- ``run_input``: ``RunAgentInput`` validation and conversion to the engine's ``TurnRequest``.
- ``runs``: run, connect, stop and suggest, on ``turn_start`` like every protocol surface.
- ``translate`` (canonical events -> AG-UI events, compaction) and ``encoder`` (SSE bytes).
- ``replay``: ``connect`` from the durable run log, then the running run live.
- ``threads`` and ``messages``: the thread endpoints on the conversations models.
- ``info`` (``GET /info``), ``headers`` (what would be forwarded to AG-UI agents), ``demo``
  (the demo chat page at ``/``).
"""
