"""A/B benchmark of the skeleton index: this tree's ``feds`` against another checkout's, in one
process, repetitions interleaved (each side first in every other one), so both see the same
machine load.

The other checkout (``--other DIR``, e.g. made by ``git archive main | tar -x -C DIR``) is
imported as a second copy of the ``feds`` package; each side builds its patterns and values
with its own classes. Workloads are those of ``benchmarks/dataspace.py``
(``<temp "room-i" v>``, float readings): assert+retract pairs with N room observers and with N
wildcard observers, and messages with N room observers. Reported: the median time per
operation of each side and their ratio (this tree / other; above 1 is slower). Time is the
process's CPU time (``time.process_time``), so that other processes competing for the cores
do not count: on a loaded machine wall-clock figures of long repetitions are inflated by
waiting for a core.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import statistics
import sys
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

HERE = Path(__file__).resolve().parent.parent


def load(root: Path) -> SimpleNamespace:
    """The ``feds`` modules the benchmark needs, imported from the checkout at ``root``."""
    saved = {k: v for k, v in sys.modules.items() if k == "feds" or k.startswith("feds.")}
    for k in saved:
        del sys.modules[k]
    sys.path.insert(0, str(root))
    try:
        mods = SimpleNamespace(
            index=importlib.import_module("feds.index"),
            patterns=importlib.import_module("feds.patterns"),
            values=importlib.import_module("feds.values"),
        )
    finally:
        sys.path.remove(str(root))
        for k in [k for k in sys.modules if k == "feds" or k.startswith("feds.")]:
            del sys.modules[k]
        sys.modules.update(saved)
    return mods


class Side:
    """One copy of feds with the workload built from its own classes."""

    def __init__(self, mods: SimpleNamespace, n_values: int) -> None:
        v = mods.values
        self.mods = mods
        rec, sym, fd = v.Record, v.Symbol, v.FrozenDict
        self.discard = rec(sym("_"), ())
        self.bind = rec(sym("bind"), (self.discard,))
        self.temp = sym("temp")
        self.rec, self.sym, self.fd = rec, sym, fd
        self.values = [rec(self.temp, (f"room-{i}", float(i))) for i in range(n_values)]

    def pattern(self, room: Any) -> Any:
        rec, sym = self.rec, self.sym
        entries = self.fd({0: room, 1: self.bind})
        return rec(sym("group"), (rec(sym("rec"), (self.temp,)), entries))

    def index(self, kind: str, n: int) -> Any:
        index = self.mods.index.Index()
        compile_pattern = self.mods.patterns.compile_pattern
        for i in range(n):
            room = self.bind if kind == "wildcard" else self.rec(self.sym("lit"), (f"room-{i}",))
            index.add_handler(compile_pattern(self.pattern(room)), lambda e, c, k: None)
        return index


def run(index: Any, values: list, what: str) -> float:
    gc.collect()
    t0 = time.process_time()
    if what == "messages":
        send = index.send_message
        for v in values:
            send(v)
    else:
        add, remove = index.add_assertion, index.remove_assertion
        for v in values:
            add(v)
        for v in values:
            remove(v)
    return (time.process_time() - t0) / len(values)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--other", type=Path, required=True, help="the checkout to compare with")
    parser.add_argument("--reps", type=int, default=15, help="repetitions per cell (median)")
    parser.add_argument("--values", type=int, default=5000, help="assertions per repetition")
    args = parser.parse_args(argv)
    mods = {"this": load(HERE), "other": load(args.other)}
    cells = [
        ("assert+retract", "room", 10),
        ("assert+retract", "room", 100),
        ("assert+retract", "wildcard", 10),
        ("messages", "room", 10),
        ("messages", "room", 100),
    ]
    print(f"index A/B: this tree against {args.other}, {args.values} values, median of {args.reps}")
    print(f"  {'workload':<32} {'this ns':>9} {'other ns':>9} {'this/other':>10}")
    for what, kind, n in cells:
        times: dict[str, list[float]] = {name: [] for name in mods}
        order = list(mods)
        for _ in range(args.reps):
            # Each side is built and run first in every other repetition: whichever side's
            # objects are allocated first runs faster (by up to 25 % for identical code).
            order.reverse()
            built = {name: Side(mods[name], args.values) for name in order}
            indexes = {name: built[name].index(kind, n) for name in order}
            for name in order:
                times[name].append(run(indexes[name], built[name].values, what))
        this, other = (statistics.median(times[k]) for k in ("this", "other"))
        label = f"{what}, {n} {kind} observers"
        print(f"  {label:<32} {this * 1e9:>9,.0f} {other * 1e9:>9,.0f} {this / other:>10.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
