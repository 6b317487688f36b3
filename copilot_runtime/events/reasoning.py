"""What makes a reasoning block replayable to its provider: Anthropic's signature on a
``thinking`` block, or the encrypted data of a ``redacted_thinking`` block.

With extended thinking on, Anthropic requires an assistant turn's thinking blocks back, as
they were, in the next request; it checks the signature itself, so the text cannot be changed
on the way. The value travels as the AG-UI reasoning message's ``encryptedValue``
(``REASONING_ENCRYPTED_VALUE``): the v2 client keeps it on the message and sends it back with
the history, and the engine rebuilds the block from it and the message's text.
"""

from __future__ import annotations

from typing import Any

import orjson

# The key of an OpenAI-shaped assistant message (the engine's model messages) holding the
# thinking blocks that came before it; only the Anthropic adapter sends them.
THINKING_BLOCKS = "thinking_blocks"
_SIGNATURE = "anthropic.signature"
_REDACTED = "anthropic.redacted"


def sealed_value(*, signature: str = "", redacted: str = "") -> str:
    """The ``encryptedValue`` of a thinking block ("" when there is nothing to replay)."""
    if redacted:
        return orjson.dumps({_REDACTED: redacted}).decode()
    if signature:
        return orjson.dumps({_SIGNATURE: signature}).decode()
    return ""


def thinking_block(*, content: str, encrypted_value: Any) -> dict[str, Any] | None:
    """The Anthropic content block a reasoning message stands for; None when its
    ``encryptedValue`` is not one this runtime made (another provider's, or none)."""
    if not isinstance(encrypted_value, str) or not encrypted_value.startswith('{"anthropic.'):
        return None
    try:
        value = orjson.loads(encrypted_value)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(value, dict):
        return None
    redacted = value.get(_REDACTED)
    if isinstance(redacted, str) and redacted:
        return {"type": "redacted_thinking", "data": redacted}
    signature = value.get(_SIGNATURE)
    if isinstance(signature, str) and signature:
        return {"type": "thinking", "thinking": content, "signature": signature}
    return None
