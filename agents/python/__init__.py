"""Python agents: ``PythonAgent`` subclasses, and the built-in configurable LLM agent."""

from agents.python.base import AgentContext, PythonAgent, TextWriter

__all__ = ["AgentContext", "PythonAgent", "TextWriter"]
