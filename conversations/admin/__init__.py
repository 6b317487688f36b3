"""The admin, and the session inspector built into it.

Modules: ``threads`` (threads and the inspector's views), ``runs`` (runs, stopping them),
``usage_page`` (the usage report, on the admin index), ``rows`` (messages, agent states, run
events, spans); the inspector's data in ``inspector``, ``call_content``, ``waterfall``,
``state_diff``, ``usage``, ``usage_report`` and ``export``; what its buttons do in
``operations``. Templates ship with the app, under ``templates/admin/conversations/``.
"""

from conversations.admin import rows, runs, threads, usage_page

__all__ = ["rows", "runs", "threads", "usage_page"]
