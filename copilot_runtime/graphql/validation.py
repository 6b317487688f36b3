"""Validation rules the runtime adds to GraphQL's own.

``OneTurnPerOperation``: a turn costs a model call, so one request must not start many. Without
this rule a single small document could alias ``generateCopilotResponse`` a hundred times, each
alias with a fresh thread (so ``THREAD_BUSY`` never applies) and its own model call. Fields are
counted at the operation's root, through fragments and inline fragments, whatever ``@skip`` or
``@include`` say (a document is valid or not regardless of its variables).
"""

from __future__ import annotations

from typing import Any

from graphql import (
    FieldNode,
    FragmentSpreadNode,
    GraphQLError,
    InlineFragmentNode,
    OperationDefinitionNode,
    SelectionSetNode,
    ValidationRule,
    specified_rules,
)

# Root fields that start a turn (and so a model call).
TURN_FIELDS = frozenset({"generateCopilotResponse", "copilotStream"})


def one_turn_message(count: int) -> str:
    return f"An operation starts at most one turn; this one selects {count} turn fields."


class OneTurnPerOperation(ValidationRule):
    def enter_operation_definition(self, node: OperationDefinitionNode, *_args: Any) -> None:
        count = self._turn_fields(node.selection_set, set())
        if count > 1:
            self.report_error(GraphQLError(one_turn_message(count), node))

    def _turn_fields(self, selection_set: SelectionSetNode | None, seen: set[str]) -> int:
        if selection_set is None:
            return 0
        count = 0
        for selection in selection_set.selections:
            if isinstance(selection, FieldNode):
                count += selection.name.value in TURN_FIELDS
            elif isinstance(selection, InlineFragmentNode):
                count += self._turn_fields(selection.selection_set, seen)
            elif isinstance(selection, FragmentSpreadNode):
                name = selection.name.value
                fragment = self.context.get_fragment(name)
                if fragment is None or name in seen:
                    continue  # reported by GraphQL's own rules
                seen.add(name)
                count += self._turn_fields(fragment.selection_set, seen)
        return count


RUNTIME_RULES = (*specified_rules, OneTurnPerOperation)
