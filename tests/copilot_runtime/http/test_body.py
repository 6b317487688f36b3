"""The declared ``Content-Length`` of a runtime request (``copilot_runtime/http/body.py``): a
number over the limit is a 413 and anything that is no number a 400, also where Django
serves the request without the front before it (a host project's own ASGI or WSGI stack)."""

from __future__ import annotations

import pytest
from django.test import AsyncClient

from copilot_runtime.http.body import BAD_LENGTH, declared_length_refusal
from tests.copilot_runtime.agui.helpers import BASE, body_of

LIMIT = 4096
FIVE_THOUSAND_DIGITS = "9" * 5000


@pytest.mark.parametrize("declared", [None, "", "0", "4096", "0004096"])
def test_an_absent_or_acceptable_length_is_no_refusal(declared: str | None) -> None:
    assert declared_length_refusal(declared, LIMIT) is None


@pytest.mark.parametrize("declared", ["4097", FIVE_THOUSAND_DIGITS])
def test_a_length_over_the_limit_is_a_413_however_many_digits(declared: str) -> None:
    refusal = declared_length_refusal(declared, LIMIT)

    assert refusal is not None
    assert (refusal.status, refusal.error) == (413, "payload_too_large")


@pytest.mark.parametrize("declared", ["²", "٣", " 5", "+5", "-1", "5.0", "1_0", "5, 5"])
def test_a_length_that_is_no_number_is_a_400(declared: str) -> None:
    refusal = declared_length_refusal(declared, LIMIT)

    assert refusal is not None
    assert (refusal.status, refusal.error, refusal.message) == (400, "invalid_request", BAD_LENGTH)


# --- through Django alone: no front before it ---------------------------------------------------


async def post_declaring(path: str, declared: str) -> object:
    # No body: the declared length alone (a header is latin-1, so "²" is the byte 0xB2).
    return await AsyncClient().generic("POST", BASE + path, headers={"Content-Length": declared})


@pytest.mark.django_db
@pytest.mark.parametrize(
    "path",
    [
        "/agent/default/run",  # read_json_body
        "/agent/default/stop/t-1",  # request.body, whose own int() fails on a malformed length
    ],
)
async def test_django_answers_a_malformed_length_with_a_json_400(path: str) -> None:
    response = await post_declaring(path, "²")

    assert response.status_code == 400, response.content
    assert response["Content-Type"] == "application/json"
    assert body_of(response) == {"error": "Invalid request body", "details": BAD_LENGTH}


@pytest.mark.django_db
@pytest.mark.parametrize("path", ["/agent/default/run", "/agent/default/stop/t-1"])
async def test_django_answers_a_five_thousand_digit_length_with_a_413(path: str) -> None:
    response = await post_declaring(path, FIVE_THOUSAND_DIGITS)

    assert response.status_code == 413, response.content
    assert body_of(response)["error"] == "payload_too_large"
