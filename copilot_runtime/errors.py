"""The CopilotKit error model.

Errors reach the client in the protocol's own shape: GraphQL ``errors`` with HTTP 200 and
``extensions`` carrying ``code``, ``visibility`` and ``severity`` (as the TypeScript runtime's
``CopilotKitError``), an AG-UI ``RUN_ERROR``, or a JSON 4xx on REST. Never a stack trace.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any


class ErrorCode(StrEnum):
    NETWORK_ERROR = "NETWORK_ERROR"
    NOT_FOUND = "NOT_FOUND"
    AGENT_NOT_FOUND = "AGENT_NOT_FOUND"
    API_NOT_FOUND = "API_NOT_FOUND"
    REMOTE_ENDPOINT_NOT_FOUND = "REMOTE_ENDPOINT_NOT_FOUND"
    AUTHENTICATION_ERROR = "AUTHENTICATION_ERROR"
    MISUSE = "MISUSE"
    UNKNOWN = "UNKNOWN"
    CONFIGURATION_ERROR = "CONFIGURATION_ERROR"
    MISSING_PUBLIC_API_KEY_ERROR = "MISSING_PUBLIC_API_KEY_ERROR"
    UPGRADE_REQUIRED_ERROR = "UPGRADE_REQUIRED_ERROR"
    VERSION_MISMATCH = "VERSION_MISMATCH"
    # Ours: a second request on a thread whose run is still going.
    THREAD_BUSY = "THREAD_BUSY"
    # Ours: a request the runtime cannot accept as sent (bad variables, bad ids).
    BAD_REQUEST = "BAD_REQUEST"


# code -> (HTTP status the TypeScript runtime associates, visibility, severity)
_ERROR_TRAITS: dict[ErrorCode, tuple[int, str, str]] = {
    ErrorCode.NETWORK_ERROR: (503, "banner", "critical"),
    ErrorCode.NOT_FOUND: (404, "banner", "critical"),
    ErrorCode.AGENT_NOT_FOUND: (500, "banner", "critical"),
    ErrorCode.API_NOT_FOUND: (404, "banner", "critical"),
    ErrorCode.REMOTE_ENDPOINT_NOT_FOUND: (404, "banner", "critical"),
    ErrorCode.AUTHENTICATION_ERROR: (401, "banner", "critical"),
    ErrorCode.MISUSE: (400, "dev_only", "warning"),
    ErrorCode.UNKNOWN: (500, "toast", "critical"),
    ErrorCode.CONFIGURATION_ERROR: (400, "banner", "warning"),
    ErrorCode.MISSING_PUBLIC_API_KEY_ERROR: (400, "banner", "critical"),
    ErrorCode.UPGRADE_REQUIRED_ERROR: (402, "banner", "warning"),
    ErrorCode.VERSION_MISMATCH: (400, "dev_only", "info"),
    ErrorCode.THREAD_BUSY: (409, "toast", "warning"),
    ErrorCode.BAD_REQUEST: (400, "dev_only", "warning"),
}


class CopilotKitError(Exception):
    """An error the client is meant to see, with a stable code."""

    def __init__(
        self, message: str, *, code: ErrorCode = ErrorCode.UNKNOWN, name: str = "CopilotError"
    ) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        self.name = name

    @property
    def status_code(self) -> int:
        return _ERROR_TRAITS[self.code][0]

    @property
    def visibility(self) -> str:
        return _ERROR_TRAITS[self.code][1]

    @property
    def severity(self) -> str:
        return _ERROR_TRAITS[self.code][2]

    def extensions(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "statusCode": self.status_code,
            "code": self.code.value,
            "visibility": self.visibility,
            "severity": self.severity,
            "troubleshootingUrl": None,
        }


class AgentNotFoundError(CopilotKitError):
    def __init__(self, agent_name: str) -> None:
        super().__init__(
            f"Agent '{agent_name}' was not found. Check the agents configured in "
            "COPILOT_RUNTIME['AGENTS'].",
            code=ErrorCode.AGENT_NOT_FOUND,
            name="CopilotKitAgentDiscoveryError",
        )
        self.agent_name = agent_name


def error_extensions(code: ErrorCode, *, name: str = "CopilotError") -> dict[str, Any]:
    """Extensions for an error that is not a CopilotKitError (validation, unexpected)."""
    return CopilotKitError("", code=code, name=name).extensions()
