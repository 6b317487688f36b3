"""Spans derived from a run's canonical event stream: a pure reducer.

``SpanDeriver`` turns events into span signals and nothing else: no clock (the caller gives
each event's time), no database, no I/O, so fixtures of event sequences pin its output.

The tree of one run::

    run (or agent)            invoke_agent {agent}        the whole turn
    ├── generation            chat {model}                one per model call
    │   └── reasoning         reasoning                   when the events carry reasoning
    ├── tool                  execute_tool {name}         one per action call
    └── guardrail             guardrail {name}            one per guardrail decision

Rules:

- A generation opens at ``generation_start`` and closes at ``generation_end`` with the
  provider's usage and finish reason; its time to first chunk is the first text or tool-call
  event after its start. A ``run_error`` right after a failed model call is written onto it.
- A tool span opens when its arguments are complete (``action_end``), keyed by the tool call
  id, and closes at the matching ``action_result`` with its ``is_error``. A result whose call
  was made in an earlier run (an approved call executed now) is a span of no duration.
- ``flush`` (at the end of the run, whatever ended it) closes what is still open as
  incomplete: tools in the order they opened, reasoning, the generation, then the run.

A ``guardrail_decision`` is a guardrail span that lasted the evaluation's latency, with the
usage of the classifier call it may have made (counted in the run's usage, and priced).

Events are handled by name: ``reasoning_start`` / ``reasoning_delta`` / ``reasoning_end``
(keyed by ``message_id``; the chat engine emits them inside the model call that reasoned, so
the reasoning span is the call's child, its text the span's output when content is captured),
and any other event whose type starts with ``guardrail`` (a span of no duration).

This module drives the tree; the tree's state and how a span opens and closes are
``span_tree.py``'s, each event type's rule ``span_rules.py``'s, the spans' attributes
``span_attributes.py``'s.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from copilot_runtime.tracing import semconv as attr
from copilot_runtime.tracing.content import Redact, keep_as_is
from copilot_runtime.tracing.signals import KIND_AGENT, KIND_REASONING, KIND_RUN, KIND_TOOL, Signal
from copilot_runtime.tracing.span_attributes import root_attributes
from copilot_runtime.tracing.span_rules import GUARDRAIL, RULES
from copilot_runtime.tracing.span_tree import ROOT_KEY, RunSpanSpec, SpanTree

_NOTHING: tuple[Signal, ...] = ()


class SpanDeriver(SpanTree):
    """One run's spans, from its events. Call :meth:`start`, :meth:`observe` per event, then
    :meth:`flush` once; each returns the signals the call produced."""

    def __init__(
        self, root: RunSpanSpec, *, capture_content: bool = False, redact: Redact = keep_as_is
    ) -> None:
        super().__init__(root, capture_content=capture_content, redact=redact)
        self._started = False
        self._finished = False

    def start(self, at: float) -> list[Signal]:
        """Open the run span (once; the first event opens it when this was not called)."""
        if self._started:
            return []
        self._started = True
        root = self.root
        attributes = root_attributes(
            agent_name=root.agent_name,
            thread_id=root.thread_id,
            run_id=root.run_id,
            provider=root.provider,
            model=root.model,
        )
        return [
            self.open_span(
                ROOT_KEY,
                kind=root.kind if root.kind in (KIND_RUN, KIND_AGENT) else KIND_RUN,
                name=f"{attr.OP_INVOKE_AGENT} {root.agent_name}",
                at=at,
                parent_key=None,
                input=root.input if self.capture_content else None,
                attributes=attributes,
            )
        ]

    def observe(self, event: Any, at: float) -> Sequence[Signal]:
        if self._finished:
            return _NOTHING
        event_type: str = event.type
        if event_type == "text_delta":  # the hot path: one per token
            generation = self.generation
            if generation is not None:
                if generation.first_chunk_at is None:
                    generation.first_chunk_at = at
                if self.capture_content:
                    generation.text.append(event.delta)
            return _NOTHING
        rule = RULES.get(event_type)
        if rule is None:
            if not event_type.startswith("guardrail"):
                return _NOTHING
            rule = GUARDRAIL
        signals = [] if self._started else self.start(at)
        signals.extend(rule(self, event, at))
        return signals

    def flush(self, at: float) -> list[Signal]:
        """Close everything still open, as incomplete; the run span last."""
        if self._finished:
            return []
        signals = [] if self._started else self.start(at)
        self._finished = True
        open_spans = self.open_spans
        order = [k for k, kind in open_spans.items() if kind == KIND_TOOL]
        order += [k for k, kind in open_spans.items() if kind == KIND_REASONING]
        order += [
            k
            for k, kind in reversed(open_spans.items())
            if kind not in (KIND_TOOL, KIND_REASONING) and k != ROOT_KEY
        ]
        for key in order:
            if key in self.reasoning_text:
                output = self.reasoning_output(key)
                signals.append(self.end_span(key, at, output=output, incomplete=True))
            elif self.generation is not None and key == self.generation.key:
                signals.append(self.close_generation(at, incomplete=True))
            else:
                signals.append(self.end_span(key, at, incomplete=True))
        if ROOT_KEY in open_spans:
            signals.append(self.close_root(at))
        return signals
