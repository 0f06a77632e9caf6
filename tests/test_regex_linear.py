"""The linear-time regex matcher: the same answers as ``re.search``, at a cost linear in the
string (counted in instruction visits, never timed)."""

from __future__ import annotations

import random
import re

import pytest
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

from feds.regex_dfa import LazyDfa
from feds.regex_program import build_program

# Characters that exercise case folding (U+017F long s folds to s, U+212A the Kelvin sign to k,
# U+0130 dotted capital I), word boundaries, line anchors and digits.
ALPHABET = "aAbskK\u017f\u212a\u0130i\n _1."

ATOMS = st.sampled_from(
    [
        *"abskKiIA1_ .",
        r"\n",
        ".",
        "[ab]",
        "[^a]",
        "[a-k]",
        "[^\\n]",
        r"[\w.]",
        r"\w",
        r"\W",
        r"\d",
        r"\D",
        r"\s",
        r"\S",
        r"\b",
        r"\B",
        "^",
        "$",
        r"\A",
        r"\Z",
        "",
    ]
)
QUANTIFIERS = st.sampled_from(["*", "+", "?", "{2}", "{0,2}", "{1,3}", "{2,}", "*?", "+?", "??"])
SCOPED_FLAGS = st.sampled_from(["i", "m", "s", "-i", "i-s", "-m"])  # (?a:...) is refused


def _extend(inner: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    return st.one_of(
        st.lists(inner, min_size=2, max_size=3).map("".join),
        st.lists(inner, min_size=2, max_size=3).map(lambda xs: "(" + "|".join(xs) + ")"),
        st.tuples(inner, QUANTIFIERS).map(lambda t: f"(?:{t[0]}){t[1]}"),
        st.tuples(SCOPED_FLAGS, inner).map(lambda t: f"(?{t[0]}:{t[1]})"),
    )


GLOBAL_FLAGS = st.sampled_from(["", "(?i)", "(?m)", "(?s)", "(?a)", "(?x)", "(?ims)"])
BODIES = st.recursive(ATOMS, _extend, max_leaves=8)


def _compiles(source: str) -> bool:
    try:
        re.compile(source)
    except re.error:
        return False
    return True


def _strings(alphabet: str, longest: int) -> list[str]:
    """Every string over ``alphabet`` of length up to ``longest``."""
    out = [""]
    for _ in range(longest):
        out += [s + ch for s in out if len(s) == len(out[-1]) for ch in alphabet]
    return out


@settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    GLOBAL_FLAGS,
    BODIES,
    st.lists(st.sampled_from(ALPHABET), min_size=1, max_size=4, unique=True),
)
@example("(?i)", "(?-i:a)b", ["A", "b"])  # a scoped flag turned off
@example("(?m)", "(?-m:^a)", ["a", "\n"])
@example("", "^a|b$", ["a", "b", "\n"])  # ^ and $ at lines only under (?m)
@example("(?a)", "\\b\\w", ["\u017f", "a", " "])  # ASCII word boundaries and classes
@example("", "(?:ab){1,2}a", ["a", "b"])
@example("", "\\B", ["a"])  # not in an empty string (before Python 3.14)
def test_the_same_answers_as_re_search(flags: str, body: str, alphabet: list[str]) -> None:
    """The regex as generated, and pinned to the whole string and to its end (a search finds
    most small regexes somewhere), on every string of up to 4 characters over a few characters
    the example picks."""
    assume(_compiles(flags + body))
    strings = _strings("".join(alphabet), 4)
    for source in (flags + body, f"{flags}\\A(?:{body})\\Z", f"{flags}(?:{body})$"):
        dfa = LazyDfa(build_program(source))
        small = LazyDfa(build_program(source), cache_entries=8)  # drops its cache all the time
        for s in strings:
            expected = re.search(source, s) is not None
            assert dfa.search(s) is expected, (source, s)
            assert small.search(s) is expected, (source, s)


# (regex, input, answer): each takes polynomial or exponential time in re's backtracking.
EVIL = [
    ("a*a*b", "a" * 3000, False),
    ("a*a*a*a*a*b", "a" * 3000, False),
    ("(a|aa)*c", "a" * 3000, False),
    ("(a+)+$", "a" * 3000 + "!", False),
    ("(x+x+)+y", "x" * 3000, False),
    ("(.*a){12}", "a" * 11 + "b" * 3000, False),
    ("(.*a){12}", "ab" * 1500, True),
    ("^(a|a?)+$", "a" * 3000 + "b", False),
    (r"(\w+\s?)*$", "word " * 600 + "!", True),
    ("(a|b|ab)*bc", "ab" * 1500, False),
]


@pytest.mark.parametrize(("source", "text", "answer"), EVIL)
def test_backtracking_bombs_cost_at_most_one_program_pass_per_character(
    source: str, text: str, answer: bool
) -> None:
    program = build_program(source)
    dfa = LazyDfa(program)
    assert dfa.search(text) is answer
    bound = 2 * (len(text) + 1) * len(program)
    assert dfa.work <= bound
    # The cache makes it far cheaper than the bound: each state is built once.
    assert dfa.work <= 100 * len(program)


def test_the_bound_holds_when_the_cache_is_dropped_at_every_step() -> None:
    """Even without any reuse (a cache of one entry), each character costs one pass at most."""
    source, text = "(.*a){12}", "a" * 11 + "b" * 3000
    program = build_program(source)
    dfa = LazyDfa(program, cache_entries=1)
    assert dfa.search(text) is False
    assert dfa.resets >= len(text)
    assert 3000 * 10 < dfa.work <= 2 * (len(text) + 1) * len(program)


def test_many_distinct_states_stay_within_the_cache_and_the_bound() -> None:
    """``(a|b)*a(a|b){12}`` has thousands of DFA states: the cache is dropped, never outgrown."""
    source = "(a|b)*a(a|b){12}c"
    text = "".join(random.Random(7).choices("ab", k=20_000))
    program = build_program(source)
    dfa = LazyDfa(program)
    assert dfa.search(text) is False
    assert dfa.resets > 0
    assert dfa.work <= 2 * (len(text) + 1) * len(program)
