"""A deterministic OpenAI- and Anthropic-compatible fake upstream for tests and the benchmark.

It is a plain asyncio HTTP/1.1 server (keep-alive, chunked streaming) that answers
`POST /v1/messages` like Anthropic's Messages API (messages_api.py, from the same directives),
and any `POST .../chat/completions` (Azure's deployment URLs too) like the Chat Completions API:
`text/event-stream` chunks of `chat.completion.chunk` objects ending with `data: [DONE]`, or a
whole `chat.completion` when `stream` is not true. With `stream_options.include_usage` a last
chunk with `choices: []` and `usage` is sent. Usage is deterministic: `prompt_tokens` is the
number of whitespace-separated words in all message contents, `completion_tokens` the number of
token-bearing chunks (content tokens, tool-call headers, argument fragments).

Running it
----------
Subprocess: `python -m benchmarks.fake_upstream --host 127.0.0.1 --port 0 [--token-delay-ms X]`
prints one line `FAKE_UPSTREAM_PORT=<port>` once listening and serves until SIGTERM/SIGINT.

In-process (tests)::

    with FakeUpstream(token_delay_ms=0) as fake:          # or fake.start() / fake.stop()
        fake.script({"text": "Hello world"})
        client = AsyncOpenAI(api_key="test", base_url=fake.base_url)
        ...
        fake.requests(); fake.stats(); fake.reset()

From another process: `script_remote(base_url, *directives)`, `reset_remote(base_url)`,
`stats_remote(base_url)`, `requests_remote(base_url)`.

Scripting
---------
What a chat request gets is decided by a directive, looked up in this order:

1. the per-test queue: `POST /_fake/script` with `{"responses": [<directive>, ...]}` (or
   `FakeUpstream.script(...)`) queues directives, each chat request consumes one (FIFO);
2. a line `FAKE: <json object>` in the content of the LAST user message (a string or a list of
   content parts, whose text parts are searched);
3. otherwise the default: if the last message is a tool result, the reply is
   `Tool result: <content>`, else `You said: <last user text>` (without any `FAKE:` line).

Directive fields (all optional; unknown fields are rejected):

- `"text"`: the reply, streamed one word per chunk with its leading space ("Hello", " world").
- `"tokens"`: N -> N tokens "t0", " t1", " t2", ...
- `"tool_calls"`: `[{"name", "arguments": object | raw string, "id"?, "fragments"? (default 3)}]`
  -> a tool-call turn (finish_reason "tool_calls"). Calls get indexes 0, 1, ... in order; each
  streams a header chunk (index, id, type, function.name, empty arguments) and then its
  arguments split into `fragments` pieces. A string is sent verbatim ("" or broken JSON on
  purpose); the default id is `call_fake_<request number>_<index>`. With `text` too, the text is
  streamed first.
- `"error"`: `{"status", "message", "retry_after"?, "type"?, "code"?}` -> that HTTP status with
  `{"error": {"message", "type", "param", "code"}}` and a `Retry-After` header if given.
- `"fail_after_tokens"`: N -> stream N tokens, then close the connection without finishing the
  response (no finish chunk, no [DONE], no terminating chunk). Without `text`/`tokens` the
  content is numbered tokens. A non-streamed request is closed without an answer.
- `"hang": true` -> send the stream headers, then nothing until the client closes;
  `"hang_before_headers": true` -> send nothing at all. Either is counted as `client_closed`.
- `"delay_ms"`: delay before each token (overrides the server default `token_delay_ms`); a
  non-streamed reply waits delay x tokens.
- `"usage"`: fields merged over the computed usage (`total_tokens` is recomputed unless given).
- `"reasoning": "<text>"` -> streamed first, word by word, as reasoning deltas (the
  `"reasoning_field"`: `"reasoning_content"` (the default, as vLLM and DeepSeek send it) or
  `"reasoning"`), then the answer. On the Messages API, when the request enables thinking:
  a signed `thinking` block (thinking.py), and `"redacted_thinking": "<data>"` adds a
  `redacted_thinking` block after it.
- `"steps"`: `[<directive>, ...]` with optional `"repeat_last": true` -> for tool loops. The step
  used is the number of assistant messages after the last user message (0 for the first model
  call of a turn, 1 after one tool round, ...). Other fields next to `steps` are shared by every
  step. Past the end of the list: the last step again with `repeat_last`, otherwise only the
  shared fields apply (so, usually, the default reply).

Anthropic's Messages API
------------------------
`POST /v1/messages` (and `/messages`; point the `anthropic` SDK at the root, without `/v1`)
takes the same directives, found the same way, with Anthropic's shapes read as chat ones: the
top-level `system` counts as a system message; a user message whose content is only
`tool_result` blocks is a tool result (its content gives `Tool result: ...`), not a user turn,
so it neither holds the `FAKE:` line nor resets the `steps` index (the number of assistant
messages after the last real user turn). A streamed reply (`"stream": true`) is
`event: <type>` + `data: <json>` pairs as Anthropic sends them: `message_start` (the message
with empty content and usage, `output_tokens` 0), per text or `tool_use` block
`content_block_start` (a tool_use block carries id, name and `input: {}`) /
`content_block_delta` (`text_delta`, or `input_json_delta` with the arguments' fragments) /
`content_block_stop`, then `message_delta` (`stop_reason`, `usage.output_tokens`) and
`message_stop`. Otherwise one whole `message`. `stop_reason` is `tool_use` for a tool-call
turn, `stop_sequence` when the text holds one of the request's `stop_sequences` (the reply
ends before it, tool calls dropped), `max_tokens` when the reply has more token-bearing pieces
than the request's `max_tokens` (it is cut there), else `end_turn`. Usage: `input_tokens` is
the word count of all contents (system included), `output_tokens` the token-bearing deltas
(text tokens, tool_use block starts, input fragments), the cache fields 0; a directive's
`usage` may set `input_tokens`, `output_tokens`, `cache_read_input_tokens` and
`cache_creation_input_tokens`. Errors are the directive's status with
`{"type": "error", "error": {"type", "message"}}` (the type from the status unless given) and
`Retry-After` if given; a request the fake cannot read is a 400 `invalid_request_error`.

Control endpoints (also under `/v1/_fake/...`): `POST /_fake/script`, `POST /_fake/reset`
(clears the queue, the recorded requests and the counters), `GET /_fake/requests` (recorded
chat and Messages request bodies, newest last), `GET /_fake/stats` (`requests`, `completed`,
`errors`, `cut_off`, `client_closed`, `active`, `queued`), `GET /_fake/health`.
"""

from benchmarks.fake_upstream.directives import DirectiveError
from benchmarks.fake_upstream.harness import FakeUpstream
from benchmarks.fake_upstream.remote import (
    requests_remote,
    reset_remote,
    script_remote,
    stats_remote,
)
from benchmarks.fake_upstream.server import FakeUpstreamServer
from benchmarks.fake_upstream.state import FakeState

__all__ = [
    "DirectiveError",
    "FakeState",
    "FakeUpstream",
    "FakeUpstreamServer",
    "requests_remote",
    "reset_remote",
    "script_remote",
    "stats_remote",
]
