"""Histories the check gives up on, saved to a file and checked again.

A hypothesis seed reproduces its histories only at the code tree it ran on (what the overlay
does, and the constants hypothesis draws from the project's modules, decide its examples), so
the property test (``tests/scenario.py``, ``Scenario.violations``) saves every history that
:func:`feds.sim.history.explain` gives up on at once: :func:`save` writes what the check was
given as a readable Python literal, one file per distinct history, in :func:`folder`;
:func:`load` reads it back (parsing, never running it); ``python -m feds.sim.undecided FILE
... --budget N`` checks files again (:func:`main`), for instance with a bigger budget, and a
file can become a regression test as it is.

This module is imported only when a history is saved or checked again, and draws its strings
from :func:`explain`'s parameters or keeps them long: hypothesis mines the project's loaded
modules for short constants, so a new one would change the property test's examples.
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import inspect
import os
import sys
import tempfile
import time
from pathlib import Path

from feds.sim.history import BUDGET, COUNTEREXAMPLE, Action, Checkpoint, Event, Instance, explain
from feds.values import FrozenDict, Record, Symbol

VARIABLE = "FEDS_UNDECIDED_HISTORIES"
"""The environment variable naming the folder (:func:`folder`)."""
NAMES = tuple(inspect.signature(explain).parameters)[:4]
"""What a file assigns, in order: :func:`explain`'s arguments (history, instances, programs,
checkpoints)."""
CALLS = {
    c.__name__: c for c in (Action, Checkpoint, Instance, Record, Symbol, FrozenDict, frozenset)
}
"""What a file may call: the check's classes and the values'."""
Case = tuple[list[Event], list[Instance], dict[object, list[Action]], list[Checkpoint]]


def folder() -> Path:
    """Where the property test saves undecided histories: ``$FEDS_UNDECIDED_HISTORIES``, else
    ``feds-undecided-histories`` in the system's temporary directory."""
    default = Path(tempfile.gettempdir(), "feds-undecided-histories")
    return Path(os.environ.get(VARIABLE) or default)


def dump(case: Case, note: str = "") -> str:
    """What :func:`explain` is given, as Python source that :func:`load` reads back: an
    assignment of each argument (values as their ``repr``), ``note`` as comment lines above."""
    lines = [f"# {line}".rstrip() for line in note.splitlines()]
    indent = " " * 4
    for name, items in zip(NAMES, case, strict=True):
        if isinstance(items, dict):
            lines.append(f"{name} = {{")
            for sender, program in items.items():
                lines.append(f"{indent}{sender!r}: [")
                lines += [f"{indent * 2}{action!r}," for action in program]
                lines.append(f"{indent}],")
            lines.append("}")
        else:
            lines.append(f"{name} = [")
            lines += [f"{indent}{item!r}," for item in items]
            lines.append("]")
    lines.append("")
    return "\n".join(lines)


def save(directory: str | os.PathLike, case: Case, note: str = "") -> Path:
    """Write what :func:`explain` is given to ``history-<digest>.py`` in ``directory`` (made
    if missing; the same history, the same file) and return its path. A value whose ``repr``
    does not read back equal (an entity reference, a NaN) raises ``ValueError``."""
    text = dump(case, note=note)
    try:
        exact = _parse(text) == case
    except (ValueError, SyntaxError, TypeError) as error:
        raise ValueError(f"cannot be written as literals: {error}") from error
    if not exact:
        raise ValueError("cannot be written as literals: a value reads back different")
    digest = hashlib.sha256(dump(case).encode()).hexdigest()[:16]
    path = Path(directory, f"history-{digest}.py")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def load(path: str | os.PathLike) -> Case:
    """``(history, instances, programs, checkpoints)`` as :func:`save` wrote them: read as
    literals and calls of :data:`CALLS` only, never run."""
    return _parse(Path(path).read_text())


def _parse(text: str) -> Case:
    found: dict[str, object] = {}
    for statement in ast.parse(text).body:
        target = statement.targets[0] if isinstance(statement, ast.Assign) else None
        if not (isinstance(target, ast.Name) and target.id in NAMES):
            raise ValueError(f"line {statement.lineno}: not an assignment of {', '.join(NAMES)}")
        found[target.id] = _literal(statement.value)  # type: ignore[union-attr]
    missing = [name for name in NAMES if name not in found]
    if missing:
        raise ValueError(f"not assigned: {', '.join(missing)}")
    return tuple(found[name] for name in NAMES)  # type: ignore[return-value]


def _literal(node: ast.expr) -> object:
    """The value of ``node``: literals, and calls of :data:`CALLS` on literals."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        operand = _literal(node.operand)
        if isinstance(operand, int | float) and not isinstance(operand, bool):
            return -operand
    elif isinstance(node, ast.Tuple | ast.List | ast.Set):
        items = [_literal(e) for e in node.elts]
        kind = {ast.Tuple: tuple, ast.List: list, ast.Set: set}[type(node)]
        return kind(items)
    elif isinstance(node, ast.Dict) and None not in node.keys:
        keys = [_literal(k) for k in node.keys]  # type: ignore[arg-type]
        return dict(zip(keys, map(_literal, node.values), strict=True))
    elif (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in CALLS
        and all(k.arg is not None for k in node.keywords)
    ):
        args = [_literal(a) for a in node.args]
        kwargs = {k.arg: _literal(k.value) for k in node.keywords}
        return CALLS[node.func.id](*args, **kwargs)  # type: ignore[operator]
    raise ValueError(f"line {node.lineno}: not a literal: {ast.unparse(node)[:60]}")


def main(argv: list[str] | None = None) -> int:
    """``python -m feds.sim.undecided FILE ... [--budget N]``: check saved histories again.
    Exit status 0 if every one is explained, 1 if one is a counterexample, 3 if one is still
    undecided (and none a counterexample)."""
    budget = list(inspect.signature(explain).parameters)[4]  # the option is explain's own
    parser = argparse.ArgumentParser(
        prog="python -m feds.sim.undecided",
        description="Check again histories the property test saved when the history check "
        f"gave up on them (in ${VARIABLE}, else {folder()}): explained, a counterexample, "
        "or still undecided.",
        epilog="Exit status: 0 all explained, 1 a counterexample, 3 one still undecided.",
    )
    parser.add_argument("files", metavar="FILE", nargs="+", help="a file that save() wrote")
    parser.add_argument(
        f"--{budget}", type=int, default=BUDGET, help=f"states to visit (default {BUDGET:,})"
    )
    args = parser.parse_args(argv)
    status = 0
    for name in args.files:
        start = time.perf_counter()
        why = explain(*load(name), budget=getattr(args, budget))
        took = time.perf_counter() - start
        print(f"{name}: {why or 'explained'} ({took:.2f} s)", flush=True)
        if why is not None:
            status = 1 if why.startswith(COUNTEREXAMPLE) or status == 1 else 3
    return status


if __name__ == "__main__":
    sys.exit(main())
