"""The local evaluator: regular expressions for pattern rules, keywords for topic rules.

Both ignore case. A topic rule's text is one or more keywords or phrases separated by commas,
semicolons or new lines ("cooking, recipes, baking"); it matches when any of them appears as
whole words (a trailing "s" or "es" is allowed, so "recipe" also matches "recipes").

Both are matched with RE2 (``regex``), in time linear in the message. Small work (the usual
chat message against compiled rules) is matched right on the event loop, which costs no thread
hop; anything larger, and any rule not compiled yet, is compiled and matched on one of the
guardrails' own threads (RE2 releases the GIL while it matches), within the evaluator's
timeout, so no message or rule holds the event loop that serves everyone else.
"""

from __future__ import annotations

import asyncio
import functools
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

from copilot_runtime.guardrails.regex import (
    CompiledRule,
    compiled_if_ready,
    compiled_rule,
    topic_keywords,
)
from copilot_runtime.guardrails.rules import RuleSpec, Subject
from copilot_runtime.guardrails.verdicts import Finding, deny_reason

__all__ = ["LOCAL", "LocalEvaluator", "UnusableRule", "rule_matches", "topic_keywords"]

LOCAL = "local"
# What a job reports once its evaluation was given up (timed out or cancelled): nobody reads it.
_ABANDONED = "abandoned"

# Characters of the message times instructions of the rules' programs: the most matched on the
# event loop. Measured at worst about 6 ns each (a pattern whose automaton outgrows RE2's memory),
# so a few milliseconds at most; an ordinary pattern runs at about 2 ns per character whatever
# its size. A 2,000-character message against a few pattern rules stays on the loop; a topic
# rule (some 2,800 instructions: its Unicode word classes) leaves it past some 350 characters.
INLINE_WORK = 1_000_000

# Two threads: one rule slow to match (say a deliberately pathological pattern on a 10 MB
# message) leaves the other to the rest; more would take the event loop's CPU on a small host.
_THREADS = 2
_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


class UnusableRule(ValueError):
    """A rule the local evaluator cannot run (see ``regex``); the message says why."""


def _executor() -> ThreadPoolExecutor:
    global _pool
    with _pool_lock:  # created on first use: after a worker process forked, not before
        if _pool is None:
            _pool = ThreadPoolExecutor(max_workers=_THREADS, thread_name_prefix="guardrails")
        return _pool


def _failure(rule: RuleSpec, compiled: CompiledRule) -> str:
    if rule.is_topic:
        return f'rule "{rule.name}" cannot be checked locally: {compiled.problem}'
    return f'rule "{rule.name}" has an invalid pattern: {compiled.problem}'


def _first_failure(rules: Sequence[RuleSpec], compiled: Sequence[CompiledRule]) -> str:
    for rule, one in zip(rules, compiled, strict=True):
        if one.problem:
            return _failure(rule, one)
    return ""


def _subject_bytes(text: str) -> bytes:
    # Encoded once for every rule (re2 would encode a str again for each search); a lone
    # surrogate, which JSON can carry, is kept rather than failing the evaluation.
    return text.encode("utf-8", "surrogatepass")


def rule_matches(rule: RuleSpec, text: str) -> bool:
    """Whether ``text`` matches ``rule``; raises ``UnusableRule`` for a rule that cannot run."""
    compiled = compiled_rule(rule)
    if compiled.problem:
        raise UnusableRule(_failure(rule, compiled))
    return compiled.search(_subject_bytes(text))


def _compile_and_match(
    rules: Sequence[RuleSpec], text: str, abandoned: threading.Event
) -> tuple[str, list[bool]]:
    """On a guardrails thread: the first rule's failure, else whether each rule matched. Stops
    between rules once the evaluation was abandoned (timed out or cancelled): a search under
    way cannot be interrupted, but the ones after it need not run."""
    compiled: list[CompiledRule] = []
    for rule in rules:
        if abandoned.is_set():
            return _ABANDONED, []
        compiled.append(compiled_rule(rule))
    failure = _first_failure(rules, compiled)
    if failure:
        return failure, []
    data = _subject_bytes(text)
    matched: list[bool] = []
    for one in compiled:
        if abandoned.is_set():
            return _ABANDONED, []
        matched.append(one.search(data))
    return "", matched


def _matched_reason(rule: RuleSpec) -> str:
    if rule.is_deny:
        return deny_reason(rule)
    if rule.is_topic:
        return f'The message is about an allowed topic: "{rule.text}".'
    return f'The message matches an allowed pattern (rule "{rule.name}").'


class LocalEvaluator:
    name = LOCAL

    def __init__(self, *, timeout: float | None = None) -> None:
        # Bounds the work handed to the guardrails' threads (None: no bound); what is matched
        # on the event loop takes milliseconds at most.
        self._timeout = timeout

    async def evaluate(self, subject: Subject, rules: Sequence[RuleSpec]) -> Finding:
        started = time.perf_counter()

        def failed(error: str) -> Finding:
            latency = int((time.perf_counter() - started) * 1000)
            return Finding.failed(LOCAL, rules, error, latency_ms=latency)

        ready = [compiled_if_ready(rule) for rule in rules]
        compiled = [one for one in ready if one is not None]
        if len(compiled) == len(rules) and self._small(subject.text, compiled):
            failure = _first_failure(rules, compiled)
            if failure:
                return failed(failure)
            data = _subject_bytes(subject.text)
            matched = [one.search(data) for one in compiled]
        else:
            try:
                failure, matched = await self._off_loop(rules, subject.text)
            except TimeoutError:
                return failed(f"the rules were not matched within {self._timeout:g} s")
            if failure:
                return failed(failure)
        return Finding(
            evaluator=LOCAL,
            rules=list(rules),
            matched=list(matched),
            reasons=[
                _matched_reason(rule) if hit else ""
                for rule, hit in zip(rules, matched, strict=True)
            ],
            latency_ms=int((time.perf_counter() - started) * 1000),
        )

    @staticmethod
    def _small(text: str, compiled: Sequence[CompiledRule]) -> bool:
        return len(text) * sum(one.program_size for one in compiled) <= INLINE_WORK

    async def _off_loop(self, rules: Sequence[RuleSpec], text: str) -> tuple[str, list[bool]]:
        abandoned = threading.Event()
        job = functools.partial(_compile_and_match, list(rules), text, abandoned)
        try:
            async with asyncio.timeout(self._timeout):
                # Cancelled on timeout: a job still queued never starts.
                return await asyncio.get_running_loop().run_in_executor(_executor(), job)
        finally:
            abandoned.set()
