"""``copilot_runtime.broker:Transport``: the worker's Redis transport, by the name a project's
Celery settings give it (``CELERY_BROKER_TRANSPORT``).

kombu's own Redis transport, with the kombu lane of copilot_runtime/fastlane/kombu.py where
that lane is open; with it closed (an untested kombu, ``FAST_LANE`` off), exactly kombu's.
"""

from __future__ import annotations

from copilot_runtime.fastlane.kombu import Transport

__all__ = ["Transport"]
