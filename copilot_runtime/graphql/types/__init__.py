"""GraphQL contract types, named exactly as CopilotKit runtime 1.10.6's generated SDL."""
