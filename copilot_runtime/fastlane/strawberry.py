"""The strawberry lane: graphql-core's schema behind strawberry's, to execute on directly.

The runtime executes documents with graphql-core itself (copilot_runtime/graphql/execution.py:
strawberry's own incremental payloads break urql's ``@stream`` merge), and the fast path
coerces variables and reads input types with it, so it needs the ``graphql.GraphQLSchema``
strawberry built. Strawberry keeps that schema in ``Schema._schema`` and has no public
accessor for it.

With the lane open (copilot_runtime/fastlane) that attribute is the answer: nothing is
rebuilt, and it is the very schema strawberry validated, with whatever strawberry did to it
after building.

With the lane closed the schema is built again through strawberry's public API, once per
strawberry schema. Its converter (``schema.schema_converter``) caches each type it converted,
so converting the root types again returns the same graphql-core types with the same
resolvers, and its ``type_map`` holds the types strawberry was given in ``types=``. The
directives are graphql-core's (its specified ones, ``@defer``, ``@stream``) and the schema's
operation directives, converted. Which types and directives strawberry's schema holds, and
in which order, is asked of strawberry with an introspection query (once), so
the built schema has the same ``type_map`` order, introspects and prints the same SDL
(tests/copilot_runtime/fastlane/test_strawberry.py). A type or directive strawberry's schema
has and the public API does not give (a ``@strawberry.schema_directive``: the runtime's schema
declares none) raises rather than serving a different schema.
"""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING

from django.core.exceptions import ImproperlyConfigured
from graphql import (
    GraphQLDeferDirective,
    GraphQLNamedType,
    GraphQLObjectType,
    GraphQLSchema,
    GraphQLStreamDirective,
    lexicographic_sort_schema,
    specified_directives,
    validate_schema,
)
from strawberry.schema.schema_converter import GraphQLCoreConverter
from strawberry.types import get_object_definition

from copilot_runtime.fastlane import lane_open

if TYPE_CHECKING:
    import strawberry

__all__ = ["graphql_core_schema"]

_NAMES_QUERY = "{ __schema { types { name } directives { name } } }"


def graphql_core_schema(schema: strawberry.Schema) -> GraphQLSchema:
    """The graphql-core schema to validate, execute and coerce variables with for ``schema``:
    strawberry's own with the lane open, an equivalent one built through its public API (once
    per ``schema``) with it closed. Cheap enough to call per request."""
    if lane_open("strawberry-graphql"):
        return schema._schema
    return _built(schema)


@cache
def _built(schema: strawberry.Schema) -> GraphQLSchema:
    # Strawberry schemas live as long as the process (module-level); the cache keeps them.
    converter = schema.schema_converter
    query, mutation, subscription = (
        _root_type(converter, root) for root in (schema.query, schema.mutation, schema.subscription)
    )
    type_names, directive_names = _names_in_strawberrys_schema(schema)

    known_directives = {
        directive.name: directive
        for directive in (
            *specified_directives,
            # graphql-core's experimental_execute_incrementally needs these declared (a
            # document using them does not validate otherwise); strawberry declares them
            # when its config enables incremental execution.
            GraphQLDeferDirective,
            GraphQLStreamDirective,
            *(converter.from_directive(directive) for directive in schema.directives),
        )
    }
    # Every type the converter made, and graphql-core's built-in ones, by name.
    known_types = GraphQLSchema(
        query,
        mutation,
        subscription,
        types=[
            concrete.implementation
            for concrete in converter.type_map.values()
            if isinstance(concrete.implementation, GraphQLNamedType)
        ],
        directives=list(known_directives.values()),
    ).type_map
    missing = [name for name in type_names if name not in known_types] + [
        f"@{name}" for name in directive_names if name not in known_directives
    ]
    if missing:
        raise ImproperlyConfigured(
            "strawberry's schema holds what its public API does not give: "
            f"{', '.join(missing)}; turn COPILOT_RUNTIME['FAST_LANE'] on with a tested "
            "strawberry-graphql (copilot_runtime/fastlane)."
        )
    built = GraphQLSchema(
        query,
        mutation,
        subscription,
        # All of them, in strawberry's order: graphql-core keeps the order of ``types``.
        types=[known_types[name] for name in type_names],
        directives=[known_directives[name] for name in directive_names],
        # Strawberry's back-reference from the graphql-core schema to itself, as it sets it.
        extensions={GraphQLCoreConverter.DEFINITION_BACKREF: schema},
    )
    if schema.config.sort_schema:
        # Strawberry sorts the fields too (new type objects); the names above only the types.
        built = lexicographic_sort_schema(built)
    # strawberry.Info.schema (public) reads this attribute of the graphql-core schema, so a
    # resolver asking for ``info.schema`` needs it. Setting it is inert if a later strawberry
    # stops reading it; there is no public way to give Info its schema.
    built._strawberry_schema = schema  # type: ignore[attr-defined]
    errors = validate_schema(built)
    if errors:
        # Strawberry validated its own at construction; a difference is a bug here.
        raise ImproperlyConfigured("; ".join(error.message for error in errors))
    return built


def _names_in_strawberrys_schema(schema: strawberry.Schema) -> tuple[list[str], list[str]]:
    """The names of the types and of the directives of strawberry's schema, in its order."""
    result = schema.execute_sync(_NAMES_QUERY)
    if result.errors or not result.data:
        raise ImproperlyConfigured(f"strawberry's schema did not introspect: {result.errors!r}")
    described = result.data["__schema"]
    return (
        [named["name"] for named in described["types"]],
        [directive["name"] for directive in described["directives"]],
    )


def _root_type(converter: GraphQLCoreConverter, root: type | None) -> GraphQLObjectType | None:
    if root is None:
        return None
    definition = get_object_definition(root, strict=True)
    # The converter's cache: the very type strawberry's schema holds, not a copy.
    return converter.from_object(definition)
