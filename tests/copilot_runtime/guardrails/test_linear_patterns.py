"""Rules run in linear time (RE2): no pattern and no message holds the event loop.

The incident: a deny pattern ``^(a+)+$`` saved in the admin and a message ``"a" * 29 + "!"``
kept Python's backtracking ``re`` busy for 20 s on the event loop, freezing every user of the
process. These tests fail (instead of hanging) against such an engine: ``re`` checks for signals
while it backtracks, so a watchdog interrupts a match that holds the thread for seconds.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import threading
from collections.abc import Iterator
from types import FrameType

import pytest

from copilot_runtime.guardrails.local import LocalEvaluator, rule_matches
from copilot_runtime.guardrails.regex import MAX_TOPIC_CHARS, CompiledRule
from copilot_runtime.guardrails.rules import ALLOW, DENY
from copilot_runtime.guardrails.verdicts import decide
from tests.copilot_runtime.guardrails.helpers import deny_topic, pattern, subject, topic

CATASTROPHIC = r"^(a+)+$"  # exponential for a backtracking engine on a near miss
NEAR_MISS = "a" * 29 + "!"
LINEAR = "rules run in linear time (RE2 syntax)"


class StalledError(AssertionError):
    """The code under the watchdog held its thread for seconds."""


@contextlib.contextmanager
def watchdog(seconds: float = 5.0) -> Iterator[None]:
    """Fails the test when the block holds the thread longer than ``seconds`` (a generous
    bound: each evaluation here takes milliseconds)."""

    def expire(signum: int, frame: FrameType | None) -> None:
        raise StalledError(f"the evaluation held the event loop's thread over {seconds:g} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


# --- the catastrophic pattern ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        (NEAR_MISS, False),
        ("a" * 30, True),
        ("A" * 30, True),  # case ignored
        ("a" * 100_000 + "!", False),
        ("a" * 100_000, True),
        ("a" * 2_000_000 + "!", False),  # large enough to be matched off the event loop
    ],
    ids=["near-miss-30", "match-30", "upper-30", "near-miss-100k", "match-100k", "near-miss-2M"],
)
async def test_a_catastrophic_pattern_is_evaluated_quickly_and_correctly(
    message: str, expected: bool
) -> None:
    with watchdog():
        finding = await LocalEvaluator().evaluate(subject(message), [pattern(DENY, CATASTROPHIC)])

    assert finding.error == ""
    assert finding.matched == [expected]


async def test_the_event_loop_keeps_ticking_while_the_pattern_is_evaluated() -> None:
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while ticks < 100:
            ticks += 1
            await asyncio.sleep(0)

    rules = [pattern(DENY, CATASTROPHIC)]
    with watchdog():
        ticking = asyncio.create_task(ticker())
        # One after the other, in this coroutine: a stalled first one then stops the test.
        findings = [
            await LocalEvaluator().evaluate(subject(message), rules)
            for message in (NEAR_MISS, "a" * 100_000 + "!")
        ]
        await ticking

    assert ticks == 100
    assert [finding.matched for finding in findings] == [[False], [False]]


async def test_a_long_message_is_matched_off_the_event_loop_which_keeps_ticking(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The search waits until the event loop has ticked: on the loop's own thread it would wait
    # in vain (nothing else runs there meanwhile) and report that.
    searching = threading.Event()
    ticked_meanwhile = threading.Event()
    threads: list[int] = []
    loop_turned: list[bool] = []
    search = CompiledRule.search

    def watched_search(self: CompiledRule, data: bytes) -> bool:
        threads.append(threading.get_ident())
        searching.set()
        loop_turned.append(ticked_meanwhile.wait(timeout=10))
        return search(self, data)

    monkeypatch.setattr(CompiledRule, "search", watched_search)
    evaluation = asyncio.create_task(
        LocalEvaluator().evaluate(subject("a" * 2_000_000 + "!"), [pattern(DENY, CATASTROPHIC)])
    )
    while not evaluation.done():  # this test's own coroutine is the ticker
        if searching.is_set():
            ticked_meanwhile.set()
        await asyncio.sleep(0)
    finding = evaluation.result()

    assert loop_turned == [True]
    assert threads != [threading.get_ident()]
    assert finding.matched == [False]


async def test_matching_that_outlasts_the_timeout_fails_the_evaluator(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    release = threading.Event()

    def stuck_search(self: CompiledRule, data: bytes) -> bool:
        release.wait(timeout=10)
        return False

    monkeypatch.setattr(CompiledRule, "search", stuck_search)
    rules = [pattern(DENY, CATASTROPHIC)]
    try:
        finding = await LocalEvaluator(timeout=0.05).evaluate(subject("a" * 2_000_000), rules)
    finally:
        release.set()

    assert finding.error == "the rules were not matched within 0.05 s"
    assert finding.matched == [None]


# --- rules RE2 cannot run ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("regex", "feature"),
    [
        (r"password(?=\d)", "a look-ahead"),
        (r"(?<!un)safe", "a look-behind"),
        (r"(\w+) \1", "a backreference"),
        (r"(?P<word>\w+) (?P=word)", "a backreference"),
        (r"\d++", "a possessive quantifier"),
        (r"(?>ab|a)c", "an atomic group"),
    ],
)
async def test_a_stored_pattern_re2_cannot_run_fails_the_evaluator_with_the_reason(
    regex: str, feature: str
) -> None:
    # Saved before RE2, or written by code rather than through the admin form.
    rules = [deny_topic("politics"), pattern(DENY, regex, name="Legacy")]

    with watchdog():
        finding = await LocalEvaluator().evaluate(subject("password1 safe safe"), rules)

    assert finding.error == (
        f'rule "Legacy" has an invalid pattern: this pattern uses {feature}, which rules '
        f"cannot use: {LINEAR}"
    )
    assert finding.matched == [None, None]
    # The failure policy applies, as for any evaluator that failed.
    assert decide([finding], fails_closed=True).denied
    assert not decide([finding], fails_closed=False).denied


def test_a_stored_pattern_too_long_or_too_large_fails_with_the_limit() -> None:
    with pytest.raises(ValueError, match="501 characters long; a rule's pattern may have at most"):
        rule_matches(pattern(DENY, "a" * 501), "hello")
    with pytest.raises(ValueError, match="compiles to 8,004 instructions, more than the 5,000"):
        rule_matches(pattern(DENY, ".{1000}"), "hello")


async def test_a_topic_rule_longer_than_the_local_limit_fails_with_the_reason() -> None:
    keywords = ", ".join(f"topic{number}" for number in range(200))
    assert len(keywords) > MAX_TOPIC_CHARS

    finding = await LocalEvaluator().evaluate(subject("topic7"), [topic(DENY, keywords)])

    assert finding.error.startswith(f'rule "{keywords}" cannot be checked locally: its keywords')
    assert f"more than the {MAX_TOPIC_CHARS:,} the local evaluator checks" in finding.error


# --- topic rules keep their meaning in RE2 ------------------------------------------------------


@pytest.mark.parametrize(
    ("rule_text", "message", "expected"),
    [
        ("café", "Un CAFÉ, s'il vous plaît", True),  # case folded beyond ASCII
        ("café", "deux cafés", True),
        ("café", "cafébar", False),
        ("politics", "politicsé", False),  # a letter outside ASCII still joins a word
        ("politics", "politics—really?", True),  # and punctuation outside ASCII ends one
        ("politics", "politics_today", False),
        ("politics", "politics2", False),
        ("stock market", "the stock\u00a0market", True),  # Unicode spaces, as Python's \s
        ("stock market", "the stock\u2003\u2003market", True),
        ("stock market", "the stockmarket", False),
        ("c++", "c++", True),
        ("node.js", "nodexjs", False),  # keywords are literal text
        ("a+b", "aab", False),
        (", ;\n", "anything", False),  # no keyword: never matches
    ],
)
def test_topic_keywords_match_whole_words_as_before(
    rule_text: str, message: str, expected: bool
) -> None:
    assert rule_matches(topic(ALLOW, rule_text), message) is expected


def test_patterns_keep_their_text_as_written_and_ignore_case() -> None:
    assert rule_matches(pattern(DENY, r"(?P<area>\d{3})-\d{4}"), "call 555-1234") is True
    assert rule_matches(pattern(DENY, r"^ignore"), "IGNORE that") is True
    assert rule_matches(pattern(DENY, r"^ignore"), "do not ignore") is False
    assert rule_matches(pattern(DENY, r"\bSECRET\b"), "a secret word") is True
