"""The tracer of one run: observes its events, and stores (and exports) its spans at the end.

Best effort by construction: ``observe`` and ``finish`` never raise. A failure is logged once
and switches the tracer off for the rest of the run, so tracing can never break a response.
``observe`` only touches memory (it is called once per token); everything is written in one
transaction when the run has ended.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from decimal import Decimal
from typing import Any

from conversations.store import turn_store
from conversations.store.types import SpanWrite
from copilot_runtime.conf import runtime_setting
from copilot_runtime.tracing.content import (
    Redact,
    history_reference,
    keep_as_is,
    redaction_hook,
)
from copilot_runtime.tracing.cost import prices_cached, spans_price
from copilot_runtime.tracing.deriver import SpanDeriver
from copilot_runtime.tracing.exporter import TraceExport, otlp_export_from_environment
from copilot_runtime.tracing.records import SpanBook, SpanRecord, trace_id_for_run
from copilot_runtime.tracing.signals import KIND_AGENT, KIND_RUN
from copilot_runtime.tracing.span_tree import RunSpanSpec

logger = logging.getLogger(__name__)

CHAT_AGENT = "default"


class RunTracer:
    def __init__(
        self,
        *,
        run_id: str,
        spec: RunSpanSpec,
        capture_content: bool = False,
        redact: Redact = keep_as_is,
        persist_spans: bool = True,
        export: TraceExport | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.run_id = run_id
        self.trace_id = trace_id_for_run(run_id)
        self.cost: Decimal | None = None
        self._persist_spans = persist_spans
        self._export = export
        self._clock = clock
        self._book = SpanBook()
        self._failed = False
        self._finished = False
        self._deriver = SpanDeriver(spec, capture_content=capture_content, redact=redact)
        self._book.apply(self._deriver.start(clock()))

    @classmethod
    def for_run(
        cls, *, run_id: str, thread_id: str, request: Any, model: str, provider: str = ""
    ) -> RunTracer:
        """The tracer of a run executing ``request`` (a ``TurnRequest``), from the settings;
        a tracer that does nothing if even that fails."""
        try:
            return cls._for_run(
                run_id=run_id, thread_id=thread_id, request=request, model=model, provider=provider
            )
        except Exception:
            tracer = cls(run_id=run_id, spec=RunSpanSpec(run_id, thread_id, CHAT_AGENT))
            tracer._fail("starting")
            return tracer

    @classmethod
    def _for_run(
        cls, *, run_id: str, thread_id: str, request: Any, model: str, provider: str
    ) -> RunTracer:
        capture = bool(runtime_setting("TRACE_CONTENT"))
        agent_name = str(getattr(request, "agent_name", "") or CHAT_AGENT)
        history = None
        if capture:
            history = history_reference(list(getattr(request, "messages", []) or []))
        spec = RunSpanSpec(
            run_id=run_id,
            thread_id=thread_id,
            agent_name=agent_name,
            model=model,
            provider=provider,
            kind=KIND_RUN if agent_name == CHAT_AGENT else KIND_AGENT,
            # The run span refers to the stored messages the run was sent; no copy of them.
            input={"history": history} if capture else None,
            history=history,
        )
        return cls(
            run_id=run_id,
            spec=spec,
            capture_content=capture,
            redact=redaction_hook() if capture else keep_as_is,
            persist_spans=bool(runtime_setting("TRACING")),
            export=otlp_export_from_environment(),
        )

    def observe(self, event: Any) -> None:
        if self._failed:
            return
        try:
            signals = self._deriver.observe(event, self._clock())
            if signals:
                self._book.apply(signals)
        except Exception:
            self._fail("deriving spans")

    async def close(self) -> SpanWrite | None:
        """Close what is still open and price the model calls: what the run's last write
        stores with its end (None when tracing failed)."""
        if self._failed or self._finished:
            return None
        self._finished = True
        try:
            self._book.apply(self._deriver.flush(self._clock()))
            records = self._book.records
            self.cost = spans_price(records=records, prices=await prices_cached())
            return SpanWrite(
                trace_id=self.trace_id,
                records=records,
                cost=self.cost,
                persist_spans=self._persist_spans,
                blobs=dict(self._deriver.content.blobs),
            )
        except Exception:
            self._fail("closing spans")
            return None

    def export(self) -> None:
        """Send the closed spans to the OTLP exporter, when one is configured."""
        if self._export is None or self._failed or not self._finished:
            return
        try:
            self._export.export(trace_id=self.trace_id, records=self._book.records)
        except Exception:
            self._fail("exporting spans")

    async def finish(self) -> None:
        """Close, store the spans and the run's cost on their own, and export them (for a
        run whose end is not written by the executor's last batch)."""
        trace = await self.close()
        if trace is None:
            return
        try:
            await turn_store().store_trace(run_id=self.run_id, trace=trace)
        except Exception:
            self._fail("storing spans")
            return
        self.export()

    @property
    def records(self) -> list[SpanRecord]:
        return self._book.records

    def _fail(self, doing: str) -> None:
        self._failed = True
        logger.warning(
            "tracing run %s failed while %s; the run goes on untraced",
            self.run_id,
            doing,
            exc_info=True,
        )
