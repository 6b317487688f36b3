"""The one walk of a run's events that every ``generateCopilotResponse`` path shares.

What the v1 wire makes of each canonical event is decided here, once: which events open a
streamed message (a text's ``content``, an action's ``arguments``), which deltas belong to an
open message, which messages arrive whole (a tool result, an agent state), which meta events
the client sees (interrupts only), and how the run ends (the response status first, then a
failed status for every message still open, with the reason ``v1_rules`` gives).

Two renderers subclass it: the fast path's wire encoder (``fastpath/encoder.py``, JSON
patches) and the general executor's pump (``resolvers/generate.py``, GraphQL objects). The
subscriptions deliver the run's log one event per payload, so they do not walk; they build
their objects and final status with the same helpers (``v1_objects``, ``final_response_status``).
tests/copilot_runtime/graphql/test_v1_parity.py feeds one sequence to all three.
"""

from __future__ import annotations

from typing import Any

from copilot_runtime.events import (
    ActionArgs,
    ActionEnd,
    ActionResult,
    ActionStart,
    AgentStateSnapshot,
    Event,
    MetaEvent,
    RunError,
    RunFinished,
    TextDelta,
    TextEnd,
    TextStart,
)
from copilot_runtime.graphql.v1_rules import (
    INTERRUPT_NAMES,
    final_response_status,
    open_message_failure_reason,
)


class V1Translation:
    """Feed events in order; the hooks below render them. Not thread-safe, one per response.

    A hook's ``handle`` is whatever ``open_text``/``open_action`` returned for that message.
    """

    def __init__(self) -> None:
        self.open: dict[str, Any] = {}
        self.error: RunError | None = None
        self.cancelled = False
        self.finished = False

    def feed(self, event: Event) -> bool:
        """Render one event; True once the run has finished."""
        match event:  # deltas first: nearly every event is one
            case TextDelta():
                if (handle := self.open.get(event.message_id)) is not None:
                    self.chunk(handle, event.delta)
            case ActionArgs():
                if (handle := self.open.get(event.action_execution_id)) is not None:
                    self.chunk(handle, event.delta)
            case TextStart():
                self.open[event.message_id] = self.open_text(event)
            case ActionStart():
                self.open[event.action_execution_id] = self.open_action(event)
            case TextEnd():
                self._close(event.message_id)
            case ActionEnd():
                self._close(event.action_execution_id)
            case ActionResult():
                self.result(event)
            case AgentStateSnapshot():
                self.agent_state(event)
            case MetaEvent():
                # Other meta events (an AG-UI custom event, a LangGraph exit) stay in the log.
                if event.name in INTERRUPT_NAMES:
                    self.interrupt(event)
            case RunError():
                self.error = event
            case RunFinished():
                self.cancelled = event.status == "cancelled"
                self.finish()
                return True
        return False

    def finish(self) -> None:
        """End the response: also called when the events stop without a ``RunFinished``."""
        if self.finished:
            return
        self.finished = True
        self.respond(final_response_status(self.error, cancelled=self.cancelled))
        reason = open_message_failure_reason(self.error, cancelled=self.cancelled)
        for key in list(self.open):
            self.close(self.open.pop(key), reason)

    def _close(self, key: str) -> None:
        handle = self.open.pop(key, None)
        if handle is not None:
            self.close(handle, None)

    # Hooks. ``close``'s reason is None for a message that ended well, else its failure reason.
    def open_text(self, event: TextStart) -> Any:
        raise NotImplementedError

    def open_action(self, event: ActionStart) -> Any:
        raise NotImplementedError

    def chunk(self, handle: Any, delta: str) -> None:
        raise NotImplementedError

    def close(self, handle: Any, reason: str | None) -> None:
        raise NotImplementedError

    def result(self, event: ActionResult) -> None:
        raise NotImplementedError

    def agent_state(self, event: AgentStateSnapshot) -> None:
        raise NotImplementedError

    def interrupt(self, event: MetaEvent) -> None:
        raise NotImplementedError

    def respond(self, status: dict[str, Any]) -> None:
        """The response's status, as wire JSON (``v1_rules``)."""
        raise NotImplementedError
