"""A real LangGraph graph served by ``ag-ui-langgraph`` (an AG-UI agent server), for tests.

The graph: ``chat`` calls the model (``langchain-openai``'s ``ChatOpenAI`` pointed at the
project's fake upstream) with one tool, ``get_weather``; a tool call goes to ``tools`` (a
``ToolNode``) and back to ``chat``; a text answer goes to ``approval``, which records the
forecast in the state and pauses with ``interrupt()``; the answer is stored in the state
(``approved``) and ``finish`` thanks the user with the model's next reply.

``langgraph_app(model_base_url)`` returns the FastAPI app; serve it with uvicorn
(tests/support/peer_servers.py). The graph keeps its threads in a ``MemorySaver``, so one app
instance remembers an interrupted thread until the answer resumes it.
"""

from __future__ import annotations

from typing import Any

from ag_ui_langgraph import LangGraphAgent, add_langgraph_fastapi_endpoint
from fastapi import FastAPI
from langchain_core.messages import AIMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from langgraph.checkpoint.memory import MemorySaver
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode
from langgraph.types import interrupt
from openai import DefaultAsyncHttpxClient

AGENT_PATH = "/agent"
APPROVAL_QUESTION = {"question": "Publish this forecast?"}


class ForecastState(MessagesState):
    forecast: str
    approved: str


@tool
def get_weather(city: str) -> str:
    """The weather in a city."""
    return f"Sunny in {city}, 21 degrees"


def forecast_graph_builder(model_base_url: str) -> StateGraph:
    """The graph, uncompiled: served here with a MemorySaver, and by a LangGraph server
    (tests/support/langgraph_platform) with the server's own persistence."""
    model = ChatOpenAI(
        model="gpt-4o-mini",
        base_url=model_base_url,
        api_key="test",
        streaming=True,
        max_retries=0,
        # Its own connection pool: langchain-openai otherwise shares one per process, bound to
        # the event loop of the first server that used it (closed when that server stopped).
        http_async_client=DefaultAsyncHttpxClient(),
    )
    tools = [get_weather]

    async def chat(state: ForecastState, config: RunnableConfig) -> dict[str, Any]:
        reply = await model.bind_tools(tools).ainvoke(state["messages"], config)
        return {"messages": [reply]}

    def route(state: ForecastState) -> str:
        last = state["messages"][-1]
        if isinstance(last, AIMessage) and last.tool_calls:
            return "tools"
        return "approval"

    def approval(state: ForecastState) -> dict[str, Any]:
        forecast = str(state["messages"][-1].content)
        answer = interrupt({**APPROVAL_QUESTION, "forecast": forecast})
        return {"forecast": forecast, "approved": str(answer)}

    async def finish(state: ForecastState, config: RunnableConfig) -> dict[str, Any]:
        reply = await model.ainvoke(state["messages"], config)
        return {"messages": [reply]}

    builder = StateGraph(ForecastState)
    builder.add_node("chat", chat)
    builder.add_node("tools", ToolNode(tools))
    builder.add_node("approval", approval)
    builder.add_node("finish", finish)
    builder.add_edge(START, "chat")
    builder.add_conditional_edges("chat", route, {"tools": "tools", "approval": "approval"})
    builder.add_edge("tools", "chat")
    builder.add_edge("approval", "finish")
    builder.add_edge("finish", END)
    return builder


def _graph(model_base_url: str) -> Any:
    return forecast_graph_builder(model_base_url).compile(checkpointer=MemorySaver())


def langgraph_app(model_base_url: str) -> FastAPI:
    app = FastAPI()
    agent = LangGraphAgent(
        name="forecaster", description="Forecasts and asks first", graph=_graph(model_base_url)
    )
    add_langgraph_fastapi_endpoint(app, agent, AGENT_PATH)
    return app
