"""Tracing: spans derived from each run's canonical event stream, stored in Postgres.

- ``deriver``: the pure reducer from events to span signals (``signals``);
- ``records``: the spans built from those signals during a run;
- ``tracer``: one run's tracer, fed by the executor (best effort, never raises);
- ``store``: the spans and the run's cost written at the end of the run;
- ``cost``: token usage times the model's price (``ModelPrice`` in the admin);
- ``exporter``: the optional OTLP/HTTP export;
- ``semconv``: attribute names (OpenTelemetry GenAI).
"""
