"""Micro-benchmark of the linear-time regex search (``feds.regex_safety``) against ``re``.

Benign patterns of the kind applications write, searched in short values and in one
1,000-character string by the lazy DFA (``feds.regex_dfa``, warm: it already holds the states
these strings need), by what ``compile_search`` chose for the pattern (``re`` itself for a
loop-free pattern with few paths, else the DFA) and by plain ``re``; then the cost of
compiling a pattern (``re`` with its cache purged); then backtracking bombs, where ``re`` takes
polynomial or exponential time and the DFA does not (``re`` is timed on a shorter string only:
3,000 characters take it seconds to hours), and the DFA's worst case.

Times are the median of 5 runs, in microseconds per call; ratios are over plain ``re``.

Run: ``.venv/bin/python benchmarks/regex.py [--number N]``
"""

from __future__ import annotations

import argparse
import random
import re
import statistics
import timeit
from collections.abc import Callable

from feds.regex_dfa import LazyDfa
from feds.regex_program import build_program
from feds.regex_safety import BoundedBacktracking, compile_search

BENIGN: list[tuple[str, list[str]]] = [
    ("error", ["disk error on sda", "all good", "no errors here at all"]),
    (r"^temp-\d+$", ["temp-17", "temp-x", "pressure-3"]),
    ("(?i)kitchen|hall", ["Kitchen light", "bedroom", "HALLWAY sensor"]),
    (r"\d{4}-\d{2}-\d{2}", ["on 2026-11-24 at noon", "someday", "1999-1-1"]),
    (r"^[a-z]+@[a-z]+\.[a-z]{2,}$", ["alice@example.org", "bob@local", "x@y.zz"]),
]
LONG = ("error", ("all quiet " * 100)[:1000])
BOMBS: list[tuple[str, Callable[[int], str], int]] = [  # pattern, input, length for re
    ("a*a*b", lambda n: "a" * n, 1000),  # polynomial: about n**3 steps
    ("(a+)+$", lambda n: "a" * n + "!", 22),  # exponential: doubles with each character
    ("(x+x+)+y", lambda n: "x" * n, 22),
]

WORST = ["[ab]*a[ab]{990}c", "[ab]*a(?:[ab]|ab){160}c"]
"""Regexes whose DFA never repeats a state on random text, so each character builds a new one:
one of character classes (the kernel's tests are taken in one operation), one of alternatives
(each position of the kernel is walked), both near the 1,000-instruction limit."""


def median_us(fn: Callable[[], object], number: int, runs: int = 5) -> float:
    """Median over ``runs`` of the time of one call, in microseconds."""
    times = timeit.repeat(fn, number=number, repeat=runs)
    return statistics.median(times) / number * 1e6


def search_row(source: str, strings: list[str], number: int) -> tuple[float, ...]:
    """µs per search (averaged over ``strings``): the DFA, compile_search's choice, re."""
    searchers = (
        LazyDfa(build_program(source)).search,
        compile_search(source).search,
        re.compile(source).search,
    )
    for s in strings:  # same answers, and the DFA is warm
        answers = [searcher(s) for searcher in searchers]
        assert answers[0] is answers[1] is (answers[2] is not None), (source, s)

    def run(search: Callable[[str], object]) -> float:
        def loop() -> None:
            for s in strings:
                search(s)

        return median_us(loop, number) / len(strings)

    return tuple(run(search) for search in searchers)


def compile_row(source: str, number: int) -> tuple[float, float]:
    """µs to compile ``source``: linear matcher (uncached), re (cache purged)."""

    def compile_re() -> None:
        re.purge()
        re.compile(source)

    return median_us(lambda: compile_search.__wrapped__(source), number), median_us(
        compile_re, number
    )


def bomb_rows(length: int, re_limit: int) -> list[tuple[str, float, int, float]]:
    """(pattern, ms for a fresh DFA at ``length``, re's length, ms for re there)."""
    rows = []
    for source, make, longest in BOMBS:
        re_length = min(longest, re_limit)
        text, short = make(length), make(re_length)
        fresh = lambda s=text, src=source: LazyDfa(build_program(src)).search(s)  # noqa: E731
        linear_ms = median_us(fresh, 1) / 1e3
        backtrack = re.compile(source).search
        re_ms = median_us(lambda s=short, f=backtrack: f(s), 1, runs=1) / 1e3
        rows.append((source, linear_ms, re_length, re_ms))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--number", type=int, default=20_000, help="calls per timing run")
    parser.add_argument("--length", type=int, default=3000, help="length of the bomb inputs")
    parser.add_argument(
        "--re-limit", type=int, default=1000, help="longest bomb input re is timed on (0: none)"
    )
    args = parser.parse_args()

    header = (
        f"{'pattern (short values)':<34} {'choice':>6} {'dfa':>7} {'chosen':>7} {'re':>7}"
        f" {'dfa/re':>7} {'ch./re':>7}"
    )
    print(header)
    print("-" * len(header))
    ratios: list[tuple[float, float]] = []
    rows = [(source, strings, args.number) for source, strings in BENIGN]
    rows.append((LONG[0], [LONG[1]], max(1, args.number // 100)))
    for i, (source, strings, number) in enumerate(rows):
        dfa, chosen, plain = search_row(source, strings, number)
        choice = "re" if isinstance(compile_search(source), BoundedBacktracking) else "dfa"
        label = source if i < len(BENIGN) else f"{source} (1,000 chars, no match)"
        print(
            f"{label:<34} {choice:>6} {dfa:7.2f} {chosen:7.2f} {plain:7.2f}"
            f" {dfa / plain:7.1f} {chosen / plain:7.1f}"
        )
        if i < len(BENIGN):
            ratios.append((dfa / plain, chosen / plain))
    print(
        f"median ratio on short values: dfa/re {statistics.median(r[0] for r in ratios):.1f},"
        f" chosen/re {statistics.median(r[1] for r in ratios):.1f}"
    )
    print("\nµs per search, median of 5 runs\n")

    header = f"{'compile':<34} {'feds':>8} {'re':>8} {'ratio':>7}"
    print(header)
    print("-" * len(header))
    for source, _ in BENIGN:
        linear, plain = compile_row(source, max(1, args.number // 100))
        print(f"{source:<34} {linear:8.1f} {plain:8.1f} {linear / plain:7.1f}")
    print("\nµs per compile (compile_search uncached; re with its cache purged)\n")

    header = f"{'bomb':<12} {'dfa ms, n=' + str(args.length):>20} {'re ms':>12}"
    print(header)
    print("-" * len(header))
    for source, linear_ms, re_length, re_ms in bomb_rows(args.length, args.re_limit):
        print(f"{source:<12} {linear_ms:20.2f} {re_ms:9.1f} (n={re_length})")
    print("\ndfa: a fresh matcher (compile and cold DFA included); re: one run\n")

    text = "".join(random.Random(1).choices("ab", k=args.length))
    for source in WORST:
        fresh = lambda src=source: LazyDfa(build_program(src)).search(text)  # noqa: E731
        worst = median_us(fresh, 1, runs=3) / 1e3
        print(f"worst case: {source} against {args.length} random a/b: {worst:.0f} ms")
    print("(a fresh matcher, median of 3)")


if __name__ == "__main__":
    main()
