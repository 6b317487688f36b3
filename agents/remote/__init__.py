"""CopilotKit remote endpoints: the protocol the ``copilotkit`` Python SDK serves.

``POST {url}/info`` discovers actions and agents, ``/actions/execute`` runs a remote action,
``/agents/execute`` runs an agent (a JSON-lines stream), ``/agents/state`` reads an agent's
state. Endpoints are configured in ``COPILOT_RUNTIME["REMOTE_ENDPOINTS"]``.
"""
