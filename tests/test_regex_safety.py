"""Issue 11 defect 3: a pattern from the network cannot make a node backtrack exponentially."""

from __future__ import annotations

import subprocess
import sys

import pytest

from feds.actor import Entity, Scheduler
from feds.dataspace import Dataspace, observe
from feds.patterns import PatternError, compile_pattern, match
from feds.regex_safety import regex_hazard
from feds.syntax import parse_pattern
from feds.values import record
from tests.builders import rx

EXPONENTIAL = [
    ("(a+)+$", "nested quantifier at position 4"),
    ("(?:a*)*", "nested quantifier at position 6"),
    ("((a+)c)+", "nested quantifier at position 7"),
    ("(a?){2}", "nested quantifier at position 4"),
    ("(?P<x>a+)+", "nested quantifier at position 9"),
    ("(a|ab)*", "ambiguous repetition at position 6"),
    ("(a|aa)+$", "ambiguous repetition at position 6"),
    (r"(\w|_)+", "ambiguous repetition at position 6"),
    (r"(x)\1", "backreference at position 3"),
    ("(?P<n>a)(?P=n)", "backreference at position 8"),
    ("(a)?(?(1)b|c)", "conditional group at position 4"),
]
LINEAR = [
    "(a|b)*",
    "a+b*",
    "((a|b)c)*",
    "[(]+",
    r"\(a+\)+",
    "(a?){1}",
    "a{2,}",
    "(ab){2,5}",
    "(?i)abc+",
    r"^\d+(\.\d+)?$",
    "(a+)?",
    "x(?#comment)+",
    "^kitchen|hall$",
]


@pytest.mark.parametrize(("source", "why"), EXPONENTIAL)
def test_exponential_regexes_are_refused_naming_the_position(source: str, why: str) -> None:
    hazard = regex_hazard(source)
    assert hazard is not None and hazard.startswith(why)
    with pytest.raises(PatternError, match="refused"):
        compile_pattern(rx(source))
    with pytest.raises(PatternError, match="refused"):
        match(rx(source), "aaa")  # the reference matcher refuses too


@pytest.mark.parametrize("source", LINEAR)
def test_other_regexes_are_accepted(source: str) -> None:
    assert regex_hazard(source) is None
    compile_pattern(rx(source))


class _Nothing(Entity):
    pass


def test_a_node_refuses_an_evil_observe_from_the_network_and_keeps_working() -> None:
    """The pattern of issue 11 reaches the dataspace unchecked by any client: it is kept as a
    plain assertion, never installed as a handler, so the evil string costs nothing."""
    sched = Scheduler()
    ds = Dataspace()
    evil = parse_pattern("<evil $s:/(a+)+$/>")[0]
    handlers = ds.index.handler_count()
    actor = sched.spawn(lambda t: t.publish(t.ref(ds), observe(evil, t.ref(_Nothing()))))
    sched.run_until_idle()
    assert ds.index.handler_count() == handlers  # refused: no handler to run
    sched.enqueue(actor, actor.root, lambda t: t.publish(t.ref(ds), record("evil", "a" * 40 + "!")))
    sched.run_until_idle()
    assert len(ds) == 2


def test_feds_watch_refuses_the_evil_pattern_with_the_reason() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "feds.cli", "watch", "127.0.0.1:9", "<evil $s:/(a+)+$/>"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert proc.returncode == 2
    assert "nested quantifier at position 4" in proc.stderr
