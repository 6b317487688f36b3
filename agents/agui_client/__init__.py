"""AG-UI agents, ``HttpAgent``-style: POST a ``RunAgentInput``, read the SSE events back.

This is how LangGraph (``ag-ui-langgraph``), CrewAI, Mastra, Pydantic AI and any other AG-UI
server plug in: ``COPILOT_RUNTIME["AGENTS"]["name"] = {"kind": "agui", "url": ...}``.
"""
