"""LangGraph Platform agents (kind ``langgraph``): graphs served by a LangGraph deployment,
run through the ``langgraph-sdk`` client (a LangGraph Cloud deployment, a self-hosted
LangGraph server, or ``langgraph dev``)."""
