from django.apps import AppConfig


class CopilotRuntimeConfig(AppConfig):
    name = "copilot_runtime"
    verbose_name = "Copilot runtime"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from copilot_runtime import (
            checks,  # noqa: F401  (registers the system checks)
            receivers,  # noqa: F401  (connects the cache receivers)
        )
        from copilot_runtime.conf import apply_process_settings

        apply_process_settings()
