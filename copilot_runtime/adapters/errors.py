"""The adapters' own error: a setting that cannot work (its own module, so that the kinds'
table in kinds.py and the adapters it builds on use import both ways without a cycle)."""

from __future__ import annotations


class AdapterSettingError(ValueError):
    """An adapter setting that cannot work, with the reason in words."""
