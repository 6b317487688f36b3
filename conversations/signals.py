"""Signals the conversations app sends for what it cannot do itself.

Stopping a run means reaching the process that executes it (its event loop here, or a worker
told on the channel layer): that is the runtime's run machinery, a layer above this app. The
admin asks by sending ``run_stop_requested``; the runtime's receiver
(``copilot_runtime/receivers.py``) stops the run and answers whether it was still going.
"""

from __future__ import annotations

from django.dispatch import Signal

# Sent with ``run_id``; a receiver returns True when it stopped a run that had not ended.
run_stop_requested = Signal()
