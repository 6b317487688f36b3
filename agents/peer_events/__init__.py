"""What agent peers stream, mapped to the runtime's events: a CopilotKit remote endpoint's
runtime events (``copilotkit.py``) and LangGraph's (``langgraph.py``, shared by the remote
endpoints that serve a LangGraph agent and the LangGraph Platform runner)."""
