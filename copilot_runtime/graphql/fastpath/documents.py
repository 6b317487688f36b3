"""The ``generateCopilotResponse`` document every CopilotKit GraphQL client sends.

``@copilotkit/runtime-client-gql`` (1.10.x up to today) sends this fixed mutation, re-printed by
urql with ``__typename`` added to every non-root selection set. Requests carrying exactly that
document are served by the dedicated encoder; any other document goes through the general
GraphQL executor.
"""

from __future__ import annotations

from dataclasses import replace
from functools import cache

from graphql import (
    DocumentNode,
    FieldNode,
    NameNode,
    OperationDefinitionNode,
    SelectionSetNode,
    parse,
    print_ast,
)

CLIENT_MUTATION = """
  mutation generateCopilotResponse($data: GenerateCopilotResponseInput!, $properties: JSONObject) {
    generateCopilotResponse(data: $data, properties: $properties) {
      threadId
      runId
      extensions {
        openaiAssistantAPI {
          runId
          threadId
        }
      }
      ... on CopilotResponse @defer {
        status {
          ... on BaseResponseStatus {
            code
          }
          ... on FailedResponseStatus {
            reason
            details
          }
        }
      }
      messages @stream {
        __typename
        ... on BaseMessageOutput {
          id
          createdAt
        }
        ... on BaseMessageOutput @defer {
          status {
            ... on SuccessMessageStatus {
              code
            }
            ... on FailedMessageStatus {
              code
              reason
            }
            ... on PendingMessageStatus {
              code
            }
          }
        }
        ... on TextMessageOutput {
          content @stream
          role
          parentMessageId
        }
        ... on ImageMessageOutput {
          format
          bytes
          role
          parentMessageId
        }
        ... on ActionExecutionMessageOutput {
          name
          arguments @stream
          parentMessageId
        }
        ... on ResultMessageOutput {
          result
          actionExecutionId
          actionName
        }
        ... on AgentStateMessageOutput {
          threadId
          state
          running
          agentName
          nodeName
          runId
          active
          role
        }
      }
      metaEvents @stream {
        ... on LangGraphInterruptEvent {
          type
          name
          value
        }

        ... on CopilotKitLangGraphInterruptEvent {
          type
          name
          data {
            messages {
              __typename
              ... on BaseMessageOutput {
                id
                createdAt
              }
              ... on BaseMessageOutput @defer {
                status {
                  ... on SuccessMessageStatus {
                    code
                  }
                  ... on FailedMessageStatus {
                    code
                    reason
                  }
                  ... on PendingMessageStatus {
                    code
                  }
                }
              }
              ... on TextMessageOutput {
                content
                role
                parentMessageId
              }
              ... on ActionExecutionMessageOutput {
                name
                arguments
                parentMessageId
              }
              ... on ResultMessageOutput {
                result
                actionExecutionId
                actionName
              }
            }
            value
          }
        }
      }
    }
  }
"""


def _has_typename(selection_set: SelectionSetNode) -> bool:
    return any(
        isinstance(selection, FieldNode)
        and selection.name.value == "__typename"
        and selection.alias is None
        for selection in selection_set.selections
    )


def _with_typenames(selection_set: SelectionSetNode, *, root: bool) -> SelectionSetNode:
    """urql's ``formatDocument``: ``__typename`` in every selection set below the root."""
    selections = []
    for selection in selection_set.selections:
        child = getattr(selection, "selection_set", None)
        if child is not None:
            selection = replace(selection, selection_set=_with_typenames(child, root=False))
        selections.append(selection)
    formatted = SelectionSetNode(selections=tuple(selections))
    if not root and not _has_typename(formatted):
        typename = FieldNode(name=NameNode(value="__typename"), arguments=(), directives=())
        formatted = SelectionSetNode(selections=(*selections, typename))
    return formatted


def urql_formatted(document: DocumentNode) -> DocumentNode:
    definitions = []
    for definition in document.definitions:
        if isinstance(definition, OperationDefinitionNode):
            definition = replace(
                definition, selection_set=_with_typenames(definition.selection_set, root=True)
            )
        definitions.append(definition)
    return DocumentNode(definitions=tuple(definitions))


@cache
def client_mutation_printed() -> str:
    """The canonical print of the mutation exactly as urql sends it."""
    return print_ast(urql_formatted(parse(CLIENT_MUTATION)))
