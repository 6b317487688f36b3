"""The ``generateCopilotResponse`` document every CopilotKit GraphQL client sends.

``@copilotkit/runtime-client-gql`` (1.10.x up to today) sends this fixed mutation, re-printed by
urql with ``__typename`` added to every non-root selection set. Requests carrying exactly that
document are served by the dedicated encoder; any other document goes through the general
GraphQL executor.
"""

from __future__ import annotations

from functools import cache

from graphql import (
    DocumentNode,
    FieldNode,
    NameNode,
    OperationDefinitionNode,
    SelectionSetNode,
    parse,
    print_ast,
    visit,
)
from graphql.language import Visitor

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


class _AddTypename(Visitor):
    """urql's ``formatDocument``: ``__typename`` in every selection set below the root."""

    def enter_operation_definition(self, node: OperationDefinitionNode, *_: object) -> None:
        self._root = node.selection_set

    def leave_selection_set(self, node: SelectionSetNode, *_: object) -> SelectionSetNode | None:
        if node is getattr(self, "_root", None):
            return None
        has_typename = any(
            isinstance(selection, FieldNode)
            and selection.name.value == "__typename"
            and selection.alias is None
            for selection in node.selections
        )
        if has_typename:
            return None
        typename = FieldNode(name=NameNode(value="__typename"), arguments=(), directives=())
        return SelectionSetNode(selections=(*node.selections, typename))


def urql_formatted(document: DocumentNode) -> DocumentNode:
    return visit(document, _AddTypename())


@cache
def client_mutation_printed() -> str:
    """The canonical print of the mutation exactly as urql sends it."""
    return print_ast(urql_formatted(parse(CLIENT_MUTATION)))
