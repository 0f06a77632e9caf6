"""Issue 11 defect 3: a pattern from the network cannot block a node with its regex.

Regexes run on the linear-time matcher (``tests/test_regex_linear.py`` checks its answers and
its cost); here: what patterns refuse, and that a node and the CLI behave."""

from __future__ import annotations

import subprocess
import sys

import pytest

from feds.actor import Entity, Handle, Scheduler, Turn
from feds.dataspace import Dataspace, observe
from feds.patterns import PatternError, compile_pattern, match
from feds.regex_safety import compile_search
from feds.syntax import parse_pattern
from feds.values import Value, record
from tests.builders import rx

REFUSED = [
    (r"(x)\1", "backreference"),
    ("(?P<n>a)(?P=n)", "backreference"),
    ("(a)?(?(1)b|c)", "conditional group"),
    ("a(?=b)", "cannot run a lookahead"),
    ("a(?!b)", "negative lookahead"),
    ("(?<=a)b", "cannot run a lookbehind"),
    ("(?<!a)b", "negative lookbehind"),
    ("(?>a+)b", "atomic group"),
    ("a*+b", "possessive quantifier"),
    (r"(?a:\W)", "switching between ASCII and Unicode"),  # re: True for "!", not for U+017F
    ("x{1000}", "more than 1000 matcher states"),
    ("(?:a{50}){50}", "more than 1000 matcher states"),
]
ACCEPTED = [
    "(a+)+$",  # refused as exponential before the linear matcher
    "(a|ab)*",
    r"(\w|_)+",
    "a*a*b",
    "(?i)abc+",
    r"^\d+(\.\d+)?$",
    "x(?#comment)+",
    "^kitchen|hall$",
    "(?m)^a$",
    "x{999}",
]


@pytest.mark.parametrize(("source", "why"), REFUSED)
def test_what_the_linear_matcher_cannot_run_is_refused_naming_the_construct(
    source: str, why: str
) -> None:
    with pytest.raises(PatternError, match=f"refused: .*{why}"):
        compile_pattern(rx(source))
    with pytest.raises(PatternError, match=f"refused: .*{why}"):
        match(rx(source), "aaa")  # the reference matcher refuses too


@pytest.mark.parametrize("source", ACCEPTED)
def test_other_regexes_are_accepted(source: str) -> None:
    compile_pattern(rx(source))


@pytest.mark.parametrize("source", ["a{4294967296}", "(" * 2000 + ")" * 2000, "a("])
def test_a_source_re_cannot_compile_is_an_invalid_pattern(source: str) -> None:
    """Not an OverflowError or RecursionError escaping from ``re`` (a crash in a node turn)."""
    with pytest.raises(PatternError, match="invalid regex"):
        compile_pattern(rx(source))


def test_the_matcher_follows_the_pattern_language_search_semantics() -> None:
    assert match(rx("b+"), "abba") == ()
    assert match(rx("^b"), "abba") is None
    assert match(rx("a$"), "abba\n") == ()  # re's $ also matches before a final newline
    assert match(rx("a"), 1) is None


class _Seen(Entity):
    def __init__(self) -> None:
        self.seen: list = []

    def on_publish(self, turn: Turn, value: Value, handle: Handle) -> None:
        self.seen.append(value)


def test_a_node_serves_the_evil_pattern_of_issue_11_in_linear_time() -> None:
    """The pattern of issue 11 (and ``a*a*b``, 14 s in ``re`` for 3,000 a's) now installs and
    is checked against long strings at a counted cost; the dataspace goes on serving."""
    sched = Scheduler()
    ds = Dataspace()
    seen = _Seen()
    for text in ("<evil $s:/(a+)+$/>", "<evil $s:/a*a*b/>"):
        pattern = parse_pattern(text)[0]
        sched.spawn(lambda t, p=pattern: t.publish(t.ref(ds), observe(p, t.ref(seen))))
    sched.run_until_idle()
    before = compile_search("a*a*b").work + compile_search("(a+)+$").work
    for value in ("a" * 3000 + "!", "a" * 3000, "a" * 3000 + "b"):
        sched.spawn(lambda t, v=value: t.publish(t.ref(ds), record("evil", v)))
    sched.run_until_idle()
    assert sorted(len(v[0]) for v in seen.seen) == [
        3000,
        3001,
    ]  # a…a by the first, a…ab by the second
    work = compile_search("a*a*b").work + compile_search("(a+)+$").work - before
    assert work < 2000  # instruction visits; the cached DFA reads each character once


def test_feds_watch_refuses_a_backreference_with_the_reason() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "feds.cli", "watch", "127.0.0.1:9", r"<evil $s:/(a)\1/>"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert proc.returncode == 2
    assert "backreference" in proc.stderr
