"""Message and response statuses. ``code`` is derived from the class, never passed in."""

from __future__ import annotations

from typing import Annotated

import strawberry

from copilot_runtime.graphql.types.enums import (
    FailedResponseStatusReason,
    MessageStatusCode,
    ResponseStatusCode,
)
from copilot_runtime.graphql.types.scalars import JSON

# --- message statuses ---------------------------------------------------------------------


@strawberry.type
class SuccessMessageStatus:
    @strawberry.field
    def code(self) -> MessageStatusCode:
        return MessageStatusCode.Success


@strawberry.type
class FailedMessageStatus:
    reason: str

    @strawberry.field
    def code(self) -> MessageStatusCode:
        return MessageStatusCode.Failed


@strawberry.type
class PendingMessageStatus:
    @strawberry.field
    def code(self) -> MessageStatusCode:
        return MessageStatusCode.Pending


MessageStatus = Annotated[
    FailedMessageStatus | PendingMessageStatus | SuccessMessageStatus,
    strawberry.union("MessageStatus"),
]

# --- response statuses --------------------------------------------------------------------


@strawberry.interface
class BaseResponseStatus:
    # Each concrete status sets its code here; a plain class attribute, not a field.
    status_code = ResponseStatusCode.Pending

    @strawberry.field
    def code(self) -> ResponseStatusCode:
        return self.status_code


@strawberry.type
class SuccessResponseStatus(BaseResponseStatus):
    status_code = ResponseStatusCode.Success


@strawberry.type
class FailedResponseStatus(BaseResponseStatus):
    status_code = ResponseStatusCode.Failed

    reason: FailedResponseStatusReason
    details: JSON | None = None


@strawberry.type
class PendingResponseStatus(BaseResponseStatus):
    status_code = ResponseStatusCode.Pending


ResponseStatus = Annotated[
    FailedResponseStatus | PendingResponseStatus | SuccessResponseStatus,
    strawberry.union("ResponseStatus"),
]
