"""The one name converter shared by the schema and ``input_to_dict``.

Both must agree on how a Python field name becomes its GraphQL name (``agent_name`` ->
``agentName``, explicit ``name=`` overrides such as ``openaiAssistantAPI`` win).
"""

from __future__ import annotations

from strawberry.schema.name_converter import NameConverter

NAME_CONVERTER = NameConverter(auto_camel_case=True)
