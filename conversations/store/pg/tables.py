"""The names of the tables the store's SQL reads and writes (the conversations app's models)."""

from __future__ import annotations

THREAD = "conversations_thread"
MESSAGE = "conversations_message"
RUN = "conversations_run"
RUN_EVENT = "conversations_runevent"
AGENT_STATE = "conversations_agentstate"
SPAN = "conversations_span"
TRACE_BLOB = "conversations_traceblob"
