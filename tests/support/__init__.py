"""Helpers shared by the test suite (server actions used by tests, hooks...)."""
