"""What every agent runner is given for one turn, with lazily loaded, cached extras."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from agents.interrupts import InterruptAnswer, interrupt_answer
from agents.runners.chat import BeforeServerAction
from conversations.store.health import db_sync_to_async
from copilot_runtime.adapters.base import ModelAdapter
from copilot_runtime.engine.actions import ServerAction
from copilot_runtime.events import MetaEvent
from copilot_runtime.events.request import TurnRequest

_UNSET: Any = object()


@dataclass
class TurnContext:
    request: TurnRequest
    adapter: ModelAdapter
    before_server_action: BeforeServerAction | None = None
    # Where the turn's server actions come from (the configured ones and the remote endpoints':
    # agents/turns.py gives ``turn_server_actions``); None offers none.
    actions_for: Callable[[TurnRequest], Awaitable[dict[str, ServerAction]]] | None = None
    _server_actions: dict[str, ServerAction] | None = field(default=None, repr=False)
    _pending: list[MetaEvent] | None = field(default=None, repr=False)
    _answer: Any = field(default=_UNSET, repr=False)

    @property
    def thread_id(self) -> str:
        return self.request.thread_id or ""

    async def server_actions(self) -> dict[str, ServerAction]:
        """The configured server actions and the remote endpoints' actions."""
        if self._server_actions is None:
            if self.actions_for is None:
                self._server_actions = {}
            else:
                self._server_actions = await self.actions_for(self.request)
        return self._server_actions

    async def pending_interrupt(self) -> list[MetaEvent]:
        """The interrupt the thread's previous run ended with (empty when none)."""
        if self._pending is None:
            from conversations.selectors import thread_pending_interrupt

            payloads = await db_sync_to_async(thread_pending_interrupt)(
                thread_pk=self.request.thread_pk
            )
            self._pending = [MetaEvent(**payload) for payload in payloads]
        return self._pending

    async def interrupt_answer(self) -> InterruptAnswer | None:
        """The request's answer to the pending interrupt (None when it carries none)."""
        if self._answer is _UNSET:
            meta_events = self.request.meta_events
            if not meta_events:
                self._answer = None
            else:
                self._answer = interrupt_answer(meta_events, await self.pending_interrupt())
        return self._answer
