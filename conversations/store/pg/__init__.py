"""The turn's storage path in raw SQL on PostgreSQL (psycopg's async connections, no thread hop).

The only raw SQL of the app, kept in this package and tested against the ORM
(tests/conversations/store/): each statement writes exactly the rows the ORM services write
(``conversations/services``), with the same defaults. A turn costs:

- its look-up: one statement (the thread, created on first use; its active runs; only the
  message ids the request carries; the latest state), shared with the turns of the same event
  loop that come while a look-up is in flight (``look_up.py``, grouped by ``../grouped.py``);
- its write (the run, the new messages, the thread's status): likewise one statement for the
  turns whose look-ups end while a write is in flight (``turn_write.py``);
- what its run writes as it goes (events, finished messages, states, the first token's time,
  its end with its spans): likewise one statement for the runs of the loop that hand theirs
  over at about the same moment (``progress.py``).

A connection is held only while those statements run, never while the model streams, so the
pool's size bounds concurrent statements, not concurrent conversations.

The modules, from the store down:

- ``store.py``: ``PgTurnStore``, the ``TurnStore`` (``../types.py``) on PostgreSQL;
- ``prepare.py``: a turn's preparation, from its look-up to its write;
- ``look_up.py``, ``turn_write.py``, ``progress.py``: the statements, and their groups;
- ``history_ids.py``: the ids a history carries, and what its known history says the thread holds;
- ``pools.py``: the connection pools and the session set-up of their connections;
- ``params.py``: rows as one JSON parameter, NUL characters replaced;
- ``errors.py``: psycopg's errors as Django's, and what a turn racing another meets;
- ``tables.py``: the names of the tables.

Nothing is imported here: ``conversations.store`` imports ``store.py`` only when the default
database is PostgreSQL.
"""
