"""The admin, and the session inspector built into it.

Modules: ``threads`` (threads and the inspector's views), ``runs`` (runs, stopping them, the
usage report), ``rows`` (messages, agent states, run events, spans); the inspector's data in
``inspector``, ``waterfall``, ``state_diff``, ``usage`` and ``export``; what its buttons do in
``operations``. Templates ship with the app, under ``templates/admin/conversations/``.
"""

from conversations.admin import rows, runs, threads

__all__ = ["rows", "runs", "threads"]
