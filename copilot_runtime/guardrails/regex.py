"""The rules' regular expressions, in RE2: a match takes time linear in the message.

Python's ``re`` backtracks: ``^(a+)+$`` against ``"a" * 29 + "!"`` runs for tens of seconds,
holding the event loop (and the GIL) all along, and no timeout can interrupt it. RE2 never
backtracks, and so refuses the features that need it (look-around, backreferences, atomic
groups, possessive quantifiers, conditionals): the admin form says so when a rule is saved, and
a rule stored with one anyway fails its evaluation instead of running.

Linear is not free for every pattern: a pattern whose automaton outgrows RE2's memory (such as
``a[ab]{1000}c``) costs per character up to its program's size, about 5 s per MB of message
when measured. Hence the bounds below, and ``local``'s rule of matching anything but small work
off the event loop.
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import re2

from copilot_runtime.guardrails.rules import RuleSpec

# An admin's pattern is a line or two; a longer one is more likely a mistake (or pasted text).
MAX_PATTERN_CHARS = 500
# RE2's compiled size, in instructions: what each character of a message may cost at worst.
# Ordinary patterns compile to tens or hundreds; ``.{100}`` to about 800, ``\pL`` to 1,200.
MAX_PROGRAM_SIZE = 5_000
# A topic rule's keywords, as the local evaluator checks them (the model and Copilot Cloud take
# topics of any length): compiling is then milliseconds, and matching stays in RE2's fast mode.
MAX_TOPIC_CHARS = 1_000

LINEAR_TIME = "rules run in linear time (RE2 syntax)"

# A rule's pattern or keywords are searched for, never extracted: no groups, case ignored.
_OPTIONS = re2.Options()
_OPTIONS.case_sensitive = False
_OPTIONS.never_capture = True
_OPTIONS.log_errors = False  # a refused pattern is explained to the admin, not logged to stderr

_SEPARATORS = re.compile(r"[,;\n]+")
# Python's \w and \s (for str), spelled for RE2, whose \w, \s and \b know ASCII only: letters,
# numbers and the underscore; the characters str.isspace() accepts.
_WORD = r"\p{L}\p{N}_"
_SPACE = r"[\t\n\x0b\f\r\x1c-\x1f\x{85}\p{Z}]"

# What RE2's parse error names (its text after the colon), as the feature the pattern uses.
_FEATURES = {
    "(?=": "a look-ahead",
    "(?!": "a look-ahead",
    "(?<=": "a look-behind",
    "(?<!": "a look-behind",
    "(?>": "an atomic group",
    "(?(": "a conditional group",
    "(?#": "a comment group",
    "(?x": "verbose mode (?x)",
    "\\k": "a backreference",
}
_BACKREFERENCE = re.compile(r"\\[1-9]")
_POSSESSIVE = re.compile(r"[*+?}]\+$")


@dataclass(frozen=True, slots=True)
class CompiledRule:
    """A rule's compiled expression, or why the local evaluator cannot run it."""

    # re2's compiled pattern (the package has no type hints); None matches nothing (a topic
    # rule without keywords, or a rule refused).
    regex: Any = None
    problem: str = ""
    program_size: int = 0

    def search(self, data: bytes) -> bool:
        return self.regex is not None and self.regex.search(data) is not None


def topic_keywords(text: str) -> list[str]:
    return [keyword.strip() for keyword in _SEPARATORS.split(text) if keyword.strip()]


def topic_source(text: str) -> str | None:
    """The expression of a topic rule: any keyword as whole words, a trailing "s" or "es"
    allowed; None without keywords. RE2 has no look-behind, so the character around a keyword
    is matched rather than asserted (the same answer to "is it there?")."""
    keywords = topic_keywords(text)
    if not keywords:
        return None
    alternatives = "|".join(
        f"{_SPACE}+".join(re2.escape(word) for word in keyword.split()) for keyword in keywords
    )
    return rf"(?:^|[^{_WORD}])(?:{alternatives})(?:e?s)?(?:[^{_WORD}]|$)"


def _parse_error(error: re2.error) -> str:
    message = error.args[0] if error.args else ""
    return message.decode(errors="replace") if isinstance(message, bytes) else str(message)


def _feature(message: str, pattern: str) -> str | None:
    """The construct RE2 refused, when it is one it lacks by design rather than a typo."""
    found = message.rpartition(": ")[2]
    if found.startswith("(?P") and "(?P=" in pattern:
        return "a backreference"
    if message.startswith("invalid escape sequence") and _BACKREFERENCE.fullmatch(found):
        return "a backreference"
    if message.startswith("bad repetition operator") and _POSSESSIVE.search(found):
        return "a possessive quantifier"
    if message.startswith("invalid escape sequence: \\Z"):
        return r"\Z (RE2 writes the end of the text \z)"
    if message.startswith("invalid repetition size"):
        return "a repetition count above 1000"
    for operator, feature in _FEATURES.items():
        if found.startswith(operator):
            return feature
    return None


def pattern_problem(text: str) -> str | None:
    """Why a pattern rule cannot be used, in words for the admin; None when it can."""
    return _compile_pattern(text).problem or None


def _compile_pattern(text: str) -> CompiledRule:
    if len(text) > MAX_PATTERN_CHARS:
        return CompiledRule(
            problem=f"this pattern is {len(text):,} characters long; "
            f"a rule's pattern may have at most {MAX_PATTERN_CHARS:,}"
        )
    try:
        regex = re2.compile(text, _OPTIONS)
    except re2.error as error:
        message = _parse_error(error)
        feature = _feature(message, text)
        if feature is None:
            return CompiledRule(problem=f"not a valid regular expression in RE2 syntax: {message}")
        return CompiledRule(
            problem=f"this pattern uses {feature}, which rules cannot use: {LINEAR_TIME}"
        )
    size = int(regex.programsize)
    if size > MAX_PROGRAM_SIZE:
        return CompiledRule(
            problem=f"this pattern compiles to {size:,} instructions, more than the "
            f"{MAX_PROGRAM_SIZE:,} a rule may use (each character of a message may cost that "
            "many steps): use smaller repetition counts or narrower character classes"
        )
    return CompiledRule(regex=regex, program_size=size)


def _compile_topic(text: str) -> CompiledRule:
    if len(text) > MAX_TOPIC_CHARS:
        return CompiledRule(
            problem=f"its keywords are {len(text):,} characters long, more than the "
            f"{MAX_TOPIC_CHARS:,} the local evaluator checks in one rule"
        )
    source = topic_source(text)
    if source is None:
        return CompiledRule()
    try:
        regex = re2.compile(source, _OPTIONS)
    except re2.error as error:  # escaped words: not expected, but reported rather than raised
        return CompiledRule(problem=f"its keywords cannot be matched: {_parse_error(error)}")
    return CompiledRule(regex=regex, program_size=int(regex.programsize))


class _CompiledCache:
    """The last compiled rules, shared by the event loop and the guardrails' threads; unlike
    ``functools.lru_cache``, it tells whether a rule is compiled without compiling it."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._entries: OrderedDict[tuple[bool, str], CompiledRule] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: tuple[bool, str]) -> CompiledRule | None:
        with self._lock:
            found = self._entries.get(key)
            if found is not None:
                self._entries.move_to_end(key)
            return found

    def put(self, key: tuple[bool, str], compiled: CompiledRule) -> None:
        with self._lock:
            self._entries[key] = compiled
            self._entries.move_to_end(key)
            while len(self._entries) > self._size:
                self._entries.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()


_compiled = _CompiledCache(512)


def compiled_if_ready(rule: RuleSpec) -> CompiledRule | None:
    """The rule's compiled expression if it was compiled already (None: not yet)."""
    return _compiled.get((rule.is_topic, rule.text))


def compiled_rule(rule: RuleSpec) -> CompiledRule:
    """The rule's compiled expression, compiled now if needed (milliseconds at most, given the
    bounds above; a problem is kept too, so a refused rule is not parsed again every turn)."""
    key = (rule.is_topic, rule.text)
    found = _compiled.get(key)
    if found is None:
        found = _compile_topic(rule.text) if rule.is_topic else _compile_pattern(rule.text)
        _compiled.put(key, found)
    return found


def compiled_cache_clear() -> None:
    _compiled.clear()
