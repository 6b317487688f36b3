"""A local LangGraph server (``langgraph dev``, in memory) serving the forecast graph."""
