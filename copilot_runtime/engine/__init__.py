"""One turn: the request model, the tool loop, server actions, and the run it records."""
