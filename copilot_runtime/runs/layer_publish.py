"""Many group messages at once, in as few round trips as the channel layer allows.

On channels_redis's pub/sub layer, with its lane open, the messages of one moment go to each
shard as one pipeline (copilot_runtime/fastlane/channels_redis.py); any other layer sends one
message at a time through its public API, and the in-memory layer only to the groups someone
joined. tests/copilot_runtime/runs/test_layer_publish.py holds each to ``group_send``'s
delivery.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from channels.layers import InMemoryChannelLayer

from copilot_runtime.fastlane.channels_redis import publish_many


async def group_send_many(layer: Any, messages: Sequence[tuple[str, dict[str, Any]]]) -> None:
    """``layer.group_send(group, message)`` for each pair, in as few round trips as the layer
    allows. Raises what the layer raised (the caller decides what a lost message costs)."""
    if await publish_many(layer, messages):
        return
    if isinstance(layer, InMemoryChannelLayer):
        # Its followers are in this process: a group nobody joined has no one to deliver to,
        # and its group_send would still walk every channel and group for expiry and wait on
        # an empty ``as_completed`` (most runs on this layer are followed by no one but the
        # HTTP stream that started them, which reads its run in-process).
        messages = [(group, message) for group, message in messages if layer.groups.get(group)]
    for group, message in messages:
        await layer.group_send(group, message)
