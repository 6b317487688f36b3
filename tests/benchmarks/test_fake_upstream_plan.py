"""The fake upstream's prompt-word count, the usage it reports (``plan.py``)."""

from __future__ import annotations

import random

from benchmarks.fake_upstream.plan import count_prompt_words

# Every whitespace str.split knows in ASCII, some it knows beyond it, and word characters.
_ALPHABET = " \t\n\x0b\x0c\r\x1c\x1d\x1e\x1f" + "\x85\xa0\u2003\u3000" + "ab.,é中"


def test_the_count_is_str_split_s_for_any_text() -> None:
    rng = random.Random(3)
    for _ in range(20_000):
        messages = [
            {"content": "".join(rng.choice(_ALPHABET) for _ in range(rng.randrange(14)))}
            for _ in range(rng.randrange(4))
        ]
        ascii_only = [
            {"content": m["content"].encode("ascii", "ignore").decode()} for m in messages
        ]
        for case in (messages, ascii_only):
            expected = sum(len(m["content"].split()) for m in case)
            assert count_prompt_words(case) == expected, case


def test_content_parts_and_messages_without_text_are_counted_as_the_api_would() -> None:
    messages = [
        {"role": "user", "content": [{"type": "text", "text": "two words"}, {"type": "image"}]},
        {"role": "assistant", "content": None, "tool_calls": []},
        {"role": "tool", "content": "one"},
        {"role": "user", "content": "  trailing  and leading  "},
    ]
    assert count_prompt_words(messages) == 6
    assert count_prompt_words([]) == 0
