"""List filters of the inspector's changelists."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.db.models import Exists, OuterRef, QuerySet
from django.http import HttpRequest

from conversations.models import Run


class ThreadErrorCodeFilter(admin.SimpleListFilter):
    """Threads with at least one run that ended with this error code."""

    title = "run error code"
    parameter_name = "error_code"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        codes = (
            Run.objects.exclude(error_code="")
            .order_by("error_code")
            .values_list("error_code", flat=True)
            .distinct()
        )
        return [(code, code) for code in codes]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        code = self.value()
        if not code:
            return queryset
        runs = Run.objects.filter(thread=OuterRef("pk"), error_code=code)
        return queryset.filter(Exists(runs))
