"""The v1 CopilotKit GraphQL surface: schema, general executor and wire framing.

``schema`` holds the contract types (exact CopilotKit names), ``execution`` parses, validates
and runs any document (answering incremental delivery in the 2022 format the CopilotKit client
merges), ``transport`` frames payloads as multipart/mixed or SSE.
"""
