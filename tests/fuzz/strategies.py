"""Hypothesis strategies for requests a hostile or careless client might send.

Each request is built the way the real clients shape it, with any field swapped for something
else: a wrong type, a NUL, an over-long id, deep nesting, a huge integer. Bodies are written with
the standard library's ``json`` (not orjson) so that integers beyond 64 bits and NaN reach the
server as a client could send them.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import quote

from hypothesis import strategies as st

# Text a careless or hostile client sends; lone surrogates are left out (JSON text cannot
# carry them unescaped, and the escaped form is covered by the raw-body strategy).
_TEXT = st.text(st.characters(exclude_categories=("Cs",)), max_size=60)
_SPECIAL_TEXT = st.sampled_from(
    [
        "",
        " ",
        "\x00",
        "a\x00b",
        "x" * 300,
        "🙂" * 70,
        "../../etc/passwd",
        "'; DROP TABLE conversations_thread; --",
        "%00",
        "99999999999999999999999-1",
        "-1",
        "null",
        "default",
        "{}",
        '{"a":' * 300 + "1" + "}" * 300,
    ]
)
hostile_text = st.one_of(_SPECIAL_TEXT, _TEXT)

_LEAF = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=False),
    hostile_text,
)
json_value = st.recursive(
    _LEAF,
    lambda children: st.one_of(
        st.lists(children, max_size=3),
        st.dictionaries(st.text(max_size=8), children, max_size=3),
    ),
    max_leaves=8,
)


def deeply_nested(levels: int) -> Any:
    value: Any = 1
    for _ in range(levels):
        value = {"a": value}
    return value


_TOO_DEEP = deeply_nested(300)


def _pick(strategy: st.SearchStrategy[Any], roll: int) -> st.SearchStrategy[Any]:
    if roll < 27:
        return strategy
    return json_value if roll < 29 else st.just(_TOO_DEEP)


def maybe(strategy: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """The well-shaped value nine times in ten, anything else (or nesting JSON cannot write
    back) otherwise: a request then usually gets past parsing and reaches deeper code."""
    return st.integers(min_value=0, max_value=29).flatmap(lambda roll: _pick(strategy, roll))


def body_bytes(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False).encode("utf-8", "surrogatepass")


# A thread the suite creates first, so that requests also reach an existing thread.
KNOWN_THREAD = "fuzz-known-thread"
_thread_id = st.one_of(st.just(KNOWN_THREAD), hostile_text)
_run_id = st.one_of(st.uuids().map(str), st.uuids().map(str), hostile_text)

# --- v1: GenerateCopilotResponseInput -----------------------------------------------------------

_ROLES = st.sampled_from(["user", "assistant", "system", "developer", "tool", "nobody"])
_ISO = st.one_of(st.just("2025-01-01T00:00:00.000Z"), hostile_text)

_v1_text = st.fixed_dictionaries(
    {"content": maybe(hostile_text), "role": maybe(_ROLES)},
    optional={"parentMessageId": maybe(hostile_text)},
)
_v1_action_execution = st.fixed_dictionaries(
    {"arguments": maybe(hostile_text), "name": maybe(hostile_text)},
    optional={"parentMessageId": maybe(hostile_text)},
)
_v1_result = st.fixed_dictionaries(
    {
        "actionExecutionId": maybe(hostile_text),
        "actionName": maybe(hostile_text),
        "result": maybe(hostile_text),
    }
)
_v1_message = st.fixed_dictionaries(
    {"id": maybe(hostile_text), "createdAt": maybe(_ISO)},
    optional={
        "textMessage": _v1_text,
        "actionExecutionMessage": _v1_action_execution,
        "resultMessage": _v1_result,
        "imageMessage": st.fixed_dictionaries(
            {"bytes": hostile_text, "format": hostile_text, "role": maybe(_ROLES)}
        ),
    },
)
_v1_action = st.fixed_dictionaries(
    {
        "name": maybe(hostile_text),
        "description": maybe(hostile_text),
        "jsonSchema": maybe(st.one_of(hostile_text, st.just('{"type":"object"}'))),
    },
    optional={"available": st.sampled_from(["enabled", "disabled", "remote", "sometimes"])},
)
_v1_agent_state = st.fixed_dictionaries(
    {"agentName": maybe(hostile_text), "state": maybe(hostile_text)},
    optional={"config": maybe(hostile_text)},
)
v1_data = st.fixed_dictionaries(
    {
        "frontend": maybe(
            st.fixed_dictionaries(
                {"actions": st.lists(_v1_action, max_size=3)},
                optional={"url": maybe(hostile_text)},
            )
        ),
        "messages": maybe(st.lists(_v1_message, max_size=4)),
        "metadata": maybe(
            st.fixed_dictionaries(
                {"requestType": st.sampled_from(["Chat", "Task", "TextareaCompletion", "Other"])}
            )
        ),
    },
    optional={
        "threadId": maybe(_thread_id),
        "runId": maybe(hostile_text),
        "agentSession": maybe(
            st.fixed_dictionaries(
                {"agentName": maybe(hostile_text)}, optional={"threadId": maybe(hostile_text)}
            )
        ),
        "agentStates": maybe(st.lists(_v1_agent_state, max_size=2)),
        "forwardedParameters": maybe(
            st.fixed_dictionaries(
                {},
                optional={
                    "maxTokens": maybe(st.floats(allow_nan=False)),
                    "model": maybe(hostile_text),
                    "temperature": maybe(st.floats(allow_nan=False)),
                    "stop": maybe(st.lists(hostile_text, max_size=3)),
                },
            )
        ),
        "context": maybe(
            st.lists(
                st.fixed_dictionaries(
                    {"description": maybe(hostile_text), "value": maybe(hostile_text)}
                ),
                max_size=2,
            )
        ),
        "metaEvents": maybe(
            st.lists(
                st.fixed_dictionaries(
                    {
                        "name": st.sampled_from(
                            ["LangGraphInterruptEvent", "CopilotKitLangGraphInterruptEvent", "X"]
                        ),
                        "value": maybe(hostile_text),
                    },
                    optional={"response": maybe(hostile_text)},
                ),
                max_size=2,
            )
        ),
    },
)
v1_properties = st.one_of(st.none(), st.just({}), json_value)

# --- v2: RunAgentInput ---------------------------------------------------------------------------

_tool_call = st.fixed_dictionaries(
    {
        "id": maybe(hostile_text),
        "type": st.sampled_from(["function", "other"]),
        "function": maybe(
            st.fixed_dictionaries({"name": maybe(hostile_text), "arguments": maybe(hostile_text)})
        ),
    }
)
_v2_message = st.fixed_dictionaries(
    {"id": maybe(hostile_text), "role": maybe(_ROLES)},
    optional={
        "content": maybe(hostile_text),
        "toolCalls": maybe(st.lists(_tool_call, max_size=2)),
        "toolCallId": maybe(hostile_text),
        "name": maybe(hostile_text),
    },
)
_v2_tool = st.fixed_dictionaries(
    {
        "name": maybe(hostile_text),
        "description": maybe(hostile_text),
        "parameters": maybe(st.just({"type": "object", "properties": {}})),
    }
)
v2_body = st.fixed_dictionaries(
    {
        "threadId": maybe(_thread_id),
        "runId": maybe(_run_id),
        "messages": maybe(st.lists(_v2_message, max_size=4)),
        "tools": maybe(st.lists(_v2_tool, max_size=2)),
        "context": maybe(
            st.lists(
                st.fixed_dictionaries(
                    {"description": maybe(hostile_text), "value": maybe(hostile_text)}
                ),
                max_size=2,
            )
        ),
    },
    optional={
        "state": json_value,
        "forwardedProps": json_value,
        "resume": maybe(st.lists(json_value, max_size=2)),
        "lastSeenEventId": maybe(hostile_text),
    },
)

# --- the single-route envelope and the threads API ------------------------------------------------

envelope = st.fixed_dictionaries(
    {
        "method": maybe(
            st.sampled_from(
                [
                    "agent/run",
                    "agent/connect",
                    "agent/stop",
                    "agent/suggest",
                    "info",
                    "transcribe",
                    "threads/list",
                    "nope",
                ]
            )
        ),
    },
    optional={
        "params": maybe(
            st.fixed_dictionaries(
                {},
                optional={"agentId": maybe(hostile_text), "threadId": maybe(hostile_text)},
            )
        ),
        "body": maybe(v2_body),
    },
)

_SEGMENT = st.one_of(
    st.just(KNOWN_THREAD), hostile_text.map(lambda text: quote(text, safe="")), st.just("%ff%fe")
)
thread_request = st.tuples(
    st.sampled_from(["GET", "PATCH", "DELETE", "POST", "PUT"]),
    st.one_of(
        st.just("threads"),
        _SEGMENT.map(lambda s: f"threads/{s}"),
        st.tuples(_SEGMENT, st.sampled_from(["messages", "state", "events", "archive"])).map(
            lambda pair: f"threads/{pair[0]}/{pair[1]}"
        ),
        st.tuples(_SEGMENT, _SEGMENT).map(lambda pair: f"agent/{pair[0]}/stop/{pair[1]}"),
    ),
    st.dictionaries(
        st.sampled_from(["limit", "cursor", "agentId", "includeArchived", "after"]),
        hostile_text,
        max_size=3,
    ),
    st.one_of(
        st.none(),
        st.fixed_dictionaries(
            {}, optional={"name": maybe(hostile_text), "archived": maybe(st.booleans())}
        ),
        json_value,
    ),
)
