"""Fixtures for the GraphQL layer's tests: a context, and a stand-in generate resolver."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from django.contrib.auth.models import AnonymousUser

from copilot_runtime.graphql.context import RuntimeContext
from copilot_runtime.graphql.resolvers import generate

GenerateResolver = Callable[..., Awaitable[Any]]


@pytest.fixture
def context() -> RuntimeContext:
    return RuntimeContext(request=None, user=AnonymousUser(), headers={})


@pytest.fixture
def install_generate(monkeypatch: pytest.MonkeyPatch) -> Callable[[GenerateResolver], None]:
    """Replace what the mutation's resolver calls with its plain arguments
    (``generate_copilot_response(context=, data=, properties=)``) for one test, so the
    schema's input conversion is tested without starting a turn."""

    def install(resolver: GenerateResolver) -> None:
        monkeypatch.setattr(generate, "generate_copilot_response", resolver)

    return install
