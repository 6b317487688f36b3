"""What every agent runner is built from: the turn's context (``context.py``), the stream that
records and encodes a peer's events like the chat engine's (``stream.py``) and the chat loop a
Python agent reuses (``chat.py``). Which runner runs a turn is ``agents/turns.py``."""
