"""Where the runtime is mounted: the one place that names its URL."""

RUNTIME_PATH = "/api/copilotkit"
