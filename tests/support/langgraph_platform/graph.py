"""The graph the local LangGraph server serves: the forecast graph of
tests/support/langgraph_agent_app.py, its model at the fake upstream named by
``FAKE_MODEL_BASE_URL`` (the server loads this module by path, from langgraph.json)."""

from __future__ import annotations

import os

from tests.support.langgraph_agent_app import forecast_graph_builder

# Compiled without a checkpointer: the LangGraph server persists the threads itself.
graph = forecast_graph_builder(os.environ["FAKE_MODEL_BASE_URL"]).compile()
