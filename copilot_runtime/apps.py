from django.apps import AppConfig


class CopilotRuntimeConfig(AppConfig):
    name = "copilot_runtime"
    verbose_name = "Copilot runtime"
    default_auto_field = "django.db.models.BigAutoField"
