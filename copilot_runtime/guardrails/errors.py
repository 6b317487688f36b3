"""A guardrails denial as the engine reports it, and the texts the wire formats use.

The denial is a canonical ``RunError`` with code ``GUARDRAILS_VALIDATION_FAILED``, its reason
as the message and ``details.guardrailsReason`` (v1 puts that in the ``FailedResponseStatus``;
AG-UI's ``RUN_ERROR`` carries the code and the reason as its message).
"""

from __future__ import annotations

from copilot_runtime.events import RunError

GUARDRAILS_CODE = "GUARDRAILS_VALIDATION_FAILED"
# What the TypeScript runtime closes an open streaming message with on a denial.
_INTERRUPTED_PREFIX = "Interrupted due to Guardrails validation failure. Reason: "


def denial_error(reason: str) -> RunError:
    return RunError(message=reason, code=GUARDRAILS_CODE, details={"guardrailsReason": reason})


def is_denial(error: RunError | None) -> bool:
    return error is not None and error.code == GUARDRAILS_CODE


def denial_reason(error: RunError) -> str:
    return str(error.details.get("guardrailsReason") or error.message)


def interrupted_message_reason(error: RunError) -> str:
    """The ``FailedMessageStatus`` reason of a message cut short by a denial."""
    return _INTERRUPTED_PREFIX + denial_reason(error)
