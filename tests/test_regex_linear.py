"""The linear-time regex matcher: the same answers as ``re.search``, at a cost linear in the
string (counted in instruction visits, never timed)."""

from __future__ import annotations

import random
import re
import re._constants as sre
import re._parser as sre_parse
import runpy
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

from feds.regex_dfa import LazyDfa
from feds.regex_program import build_program
from feds.regex_safety import (
    MAX_BACKTRACKING_PATHS,
    BoundedBacktracking,
    compile_search,
    loop_free_paths,
)

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
    bound = 3 * (len(text) + 1) * len(program)
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
    assert 3000 * 10 < dfa.work <= 3 * (len(text) + 1) * len(program)


def test_many_distinct_states_stay_within_the_cache_and_the_bound() -> None:
    """``(a|b)*a(a|b){12}`` has thousands of DFA states: the cache is dropped, never outgrown."""
    source = "(a|b)*a(a|b){12}c"
    text = "".join(random.Random(7).choices("ab", k=20_000))
    program = build_program(source)
    dfa = LazyDfa(program)
    assert dfa.search(text) is False
    assert dfa.resets > 0
    assert dfa.work <= 3 * (len(text) + 1) * len(program)


def _tree_paths(items: list) -> float:
    """Paths through a parse tree of ``re`` (infinite for an unbounded repetition): the count
    the re-backed search relies on, computed on the tree instead of the program."""
    total = 1.0
    for op, av in items:
        if op is sre.BRANCH:
            total *= sum(_tree_paths(alternative) for alternative in av[1])
        elif op is sre.SUBPATTERN:
            total *= _tree_paths(av[3])
        elif op in (sre.MAX_REPEAT, sre.MIN_REPEAT):
            least, most, body = av
            if most == sre.MAXREPEAT:
                return float("inf")
            each = _tree_paths(body)
            total *= sum(each**k for k in range(least, most + 1))
    return total


@given(GLOBAL_FLAGS, BODIES)
def test_re_searches_only_loop_free_regexes_with_few_paths(flags: str, body: str) -> None:
    """The proof that ``re`` cannot backtrack far on what it is given: no unbounded repetition,
    and at most MAX_BACKTRACKING_PATHS paths, each tried once per start position."""
    source = flags + body
    assume(_compiles(source))
    paths = _tree_paths(sre_parse.parse(source).data)
    counted = loop_free_paths(build_program(source))
    if paths == float("inf"):
        assert counted is None
    else:
        assert counted == min(paths, MAX_BACKTRACKING_PATHS + 1)
    uses_re = isinstance(compile_search(source), BoundedBacktracking)
    assert uses_re is (paths <= MAX_BACKTRACKING_PATHS)


@pytest.mark.parametrize(
    ("source", "uses_re"),
    [
        ("error", True),
        (r"\d{4}-\d{2}", True),
        ("(a|bb)(c|dd)(e|ff)(g|hh)", True),  # 16 paths ((a|b) alone is one class)
        ("(a|bb)(c|dd)(e|ff)(g|hh)(i|jj)", False),  # 32
        ("x{0,20}", False),  # 21
        ("a*", False),
        ("(?:a{1,2}){3}", True),  # 8
    ],
)
def test_the_choice_of_searcher(source: str, uses_re: bool) -> None:
    assert isinstance(compile_search(source), BoundedBacktracking) is uses_re


def test_the_regex_benchmark_runs(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``benchmarks/regex.py`` end to end in a short mode (no timing checks)."""
    bench = str(Path(__file__).resolve().parent.parent / "benchmarks" / "regex.py")
    monkeypatch.setattr(
        sys, "argv", [bench, "--number", "10", "--length", "300", "--re-limit", "0"]
    )
    runpy.run_path(bench, run_name="__main__")
    out = capsys.readouterr().out
    assert "median ratio on short values" in out
    assert "(x+x+)+y" in out
