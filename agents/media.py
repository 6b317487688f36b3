"""What a peer agent's message format can carry of a user's images and documents.

The chat engine sends images and documents to the model (copilot_runtime/adapters). A peer
agent gets the thread in its own format: the remote endpoint protocol (``/agents/execute``)
has an image message and no document, and LangGraph Platform input here is text, tool calls
and results. A turn whose new user input holds a kind its agent cannot be sent is refused
with a clear ``RUN_ERROR`` before the peer is called, rather than run without what the user
attached. Only the turn's own input is checked: an earlier turn's attachment, already
answered, does not make every later turn fail.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence

from copilot_runtime.events import Event, RunError
from copilot_runtime.events.request import InputMessage

UNSUPPORTED_CONTENT_CODE = "UNSUPPORTED_CONTENT"
MEDIA_KINDS = ("image", "document")
_NOUNS = {"image": "images", "document": "documents"}


def refused_media(
    *, messages: Sequence[InputMessage], carried: frozenset[str], agent_name: str, label: str
) -> RunError | None:
    """The refusal of the turn's new user input (its trailing user messages) when it holds
    a media kind outside ``carried``; None when it may be sent."""
    kinds: set[str] = set()
    for message in reversed(messages):
        if message.role != "user":
            break
        if message.kind in MEDIA_KINDS and message.kind not in carried:
            kinds.add(message.kind)
    if not kinds:
        return None
    refused = sorted(kinds)
    nouns = " or ".join(_NOUNS[kind] for kind in refused)
    return RunError(
        message=f"The agent '{agent_name}' ({label}) cannot be sent {nouns}; "
        "send the message without them.",
        code=UNSUPPORTED_CONTENT_CODE,
        details={"agent": agent_name, "kinds": refused},
    )


async def only(event: Event) -> AsyncIterator[Event]:
    """A stream of one event (a refusal, in place of the peer's stream)."""
    yield event
