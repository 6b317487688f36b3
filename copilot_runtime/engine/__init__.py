"""One turn: the model request, the tool loop, server actions, approvals and loop control.

What carries a turn between processes as a run (starting it, executing it on a worker, relaying
its events, stopping and reaping it) is ``copilot_runtime.runs``.
"""
