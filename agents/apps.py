from django.apps import AppConfig


class AgentsConfig(AppConfig):
    name = "agents"
    verbose_name = "Agents"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # The engine reaches agents through this host, never by importing them.
        from agents.host import AgentsHost
        from copilot_runtime.engine.agent_host import agent_host_register

        agent_host_register(AgentsHost())
