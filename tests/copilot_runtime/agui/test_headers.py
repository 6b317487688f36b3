"""Which request headers would travel on to AG-UI agents."""

from __future__ import annotations

from copilot_runtime.agui.headers import forwardable_headers, header_is_forwarded


def test_authorization_and_custom_x_headers_are_forwarded_minus_the_deny_list() -> None:
    headers = {
        "Authorization": "Bearer abc",
        "X-App": "1",
        "x-tenant-id": "t",
        "Content-Type": "application/json",
        "Cookie": "sessionid=1",
        "X-Forwarded-For": "10.0.0.1",
        "X-Real-IP": "10.0.0.1",
        "X-Request-Id": "r",
        "X-Amz-Date": "d",
        "X-Vercel-Id": "v",
        "X-CopilotCloud-Public-API-Key": "ck_pub",
        "X-CPKI-User-Id": "u",
        "X-CSRFToken": "token",
    }
    assert forwardable_headers(headers) == {
        "authorization": "Bearer abc",
        "x-app": "1",
        "x-tenant-id": "t",
    }


def test_names_are_matched_case_insensitively() -> None:
    assert header_is_forwarded("AUTHORIZATION")
    assert not header_is_forwarded("X-FORWARDED-PROTO")
    assert forwardable_headers([("X-A", "1")]) == {"x-a": "1"}
