"""Fixtures for the GraphQL layer's tests: a context, and a stand-in generate resolver."""

from __future__ import annotations

import sys
import types
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from django.contrib.auth.models import AnonymousUser

from copilot_runtime.graphql.context import RuntimeContext
from copilot_runtime.graphql.resolvers.copilot import GENERATE_MODULE

GenerateResolver = Callable[..., Awaitable[Any]]


@pytest.fixture
def context() -> RuntimeContext:
    return RuntimeContext(request=None, user=AnonymousUser(), headers={})


@pytest.fixture
def install_generate(monkeypatch: pytest.MonkeyPatch) -> Callable[[GenerateResolver], None]:
    """Replace ``resolvers.generate.resolve_generate_copilot_response`` for one test.

    The real module belongs to another part of the code base; a stand-in module in
    ``sys.modules`` is what the mutation imports, whether or not the real one exists.
    """

    def install(resolver: GenerateResolver) -> None:
        module = types.ModuleType(GENERATE_MODULE)
        module.resolve_generate_copilot_response = resolver  # type: ignore[attr-defined]
        monkeypatch.setitem(sys.modules, GENERATE_MODULE, module)

    return install
