"""A run's life across processes: started by a protocol surface, executed in this process or on a
Celery worker, its events written, relayed on the channel layer and followed by any process,
stopped on request and reaped when its executor died.

The turn itself is ``copilot_runtime.engine``; what reaches into other libraries' private names
to move runs faster is ``copilot_runtime.fastlane``.
"""
