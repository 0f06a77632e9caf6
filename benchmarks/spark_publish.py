"""Rows per second from a Spark job into a feds overlay, end to end, against two peers.

An overlay (``feds up topology/binary7.toml --any-port``) runs in its own process. This process
is the Spark driver (``local[2]``); its leaf joins under ``a1`` (:func:`feds.spark.join`), and an
observer at ``b2``, in the other subtree, counts the rows of ``<bench… $id $name $x>`` as they
arrive. For each size N, the same rows (``id``, ``"row-<id>"``, ``id / 2``) are published three
ways, interleaved, ``--reps`` times:

* **spark**: ``df.write.format("feds")`` (tasks stage at the leaf, the commit publishes all N in
  one turn), timed from ``save()`` until the observer has seen the N-th row (``save s``: until
  ``save()`` returned, that is until the leaf had applied the commit);
* **plain**: a Python ``BlockingClient.publish_many`` of the same N records into the same leaf
  node, timed from the call until the observer has seen the N-th row;
* **noop**: Spark's own ``format("noop")`` sink on the same DataFrame (Spark alone, no overlay).

Between repetitions the rows are withdrawn (and the observer sees them go). Reported: median
rows/s of each, and the ratios spark/plain (the target is >= 0.7: Spark adds little on top of
the overlay) and spark/noop (what the overlay costs a Spark job)::

    .venv/bin/python benchmarks/spark_publish.py                     # 10^4, 10^5, 10^6 rows
    .venv/bin/python benchmarks/spark_publish.py --sizes 10000 100000 --reps 3
    .venv/bin/python benchmarks/spark_publish.py --quick             # smoke run: 1000 rows, once
"""

from __future__ import annotations

import argparse
import re
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import trio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import feds.spark
from feds.blocking import BlockingClient
from feds.client import connect
from feds.spark.session import local_session
from feds.values import record

ROOT = Path(__file__).resolve().parent.parent
TOPOLOGY = ROOT / "topology" / "binary7.toml"
TIMEOUT = 1800.0


class Overlay:
    """``feds up`` in a child process; ``address(name)`` from what it prints."""

    def __init__(self) -> None:
        command = [sys.executable, "-m", "feds.cli", "up", str(TOPOLOGY), "--any-port"]
        self.process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True, cwd=ROOT)
        self.addresses: dict[str, str] = {}
        assert self.process.stdout is not None
        for line in self.process.stdout:
            match = re.match(r"node (\S+) listening on (\S+)", line)
            if match:
                self.addresses[match[1]] = match[2]
            if len(self.addresses) == 7:
                break
        if len(self.addresses) < 7:
            raise SystemExit("feds up did not start")
        self.protocol = "aggregate-subs"

    def close(self) -> None:
        self.process.terminate()
        self.process.wait(10)


class Observer:
    """Counts the + and - events of one pattern at one node; ``wait`` for a count."""

    def __init__(self, address: str, pattern: str) -> None:
        self.added = self.removed = 0
        self.last = 0.0
        self.ready = threading.Event()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=trio.run, args=(self._run, address, pattern))
        self.thread.start()
        if not self.ready.wait(30):
            raise SystemExit("the observer did not start")

    async def _run(self, address: str, pattern: str) -> None:
        async with connect(address, name="observer", timeout=TIMEOUT) as session:
            observing = session.observe(pattern)
            async with observing as events:
                await session.sync(TIMEOUT)
                self.ready.set()
                while not self.stop.is_set():
                    with trio.move_on_after(0.1):
                        event = await events.next()
                        if event.kind == "+":
                            self.added += 1
                        elif event.kind == "-":
                            self.removed += 1
                        self.last = time.perf_counter()

    def wait(self, added: int, removed: int = 0) -> float:
        """Block until the counts are reached; return when the last of those events came."""
        deadline = time.monotonic() + TIMEOUT
        while self.added < added or self.removed < removed:
            if time.monotonic() > deadline:
                raise SystemExit(f"timed out: {self.added}/{added} +, {self.removed}/{removed} -")
            time.sleep(0.005)
        return self.last

    def close(self) -> None:
        self.stop.set()
        self.thread.join(10)


def frame(spark: Any, n: int) -> Any:
    return spark.range(n).selectExpr("id", "concat('row-', id) AS name", "id / 2 AS x")


def run_spark(spark: Any, observer: Observer, n: int, label: str) -> tuple[float, float]:
    """Rows/s end to end, and the seconds ``save()`` took (staging, and the commit applied)."""
    df = frame(spark, n)
    added, removed = observer.added, observer.removed
    start = time.perf_counter()
    df.write.format("feds").option("publication", label).mode("append").save()
    saved = time.perf_counter() - start
    end = observer.wait(added + n)
    df.limit(0).write.format("feds").option("publication", label).mode("overwrite").save()
    observer.wait(added + n, removed + n)
    return n / (end - start), saved


def run_plain(address: str, observer: Observer, n: int, label: str) -> float:
    rows = [record(label, i, f"row-{i}", i / 2) for i in range(n)]
    added, removed = observer.added, observer.removed
    with BlockingClient(address, name="plain publisher", timeout=TIMEOUT) as client:
        start = time.perf_counter()
        client.publish_many(rows)
        end = observer.wait(added + n)
    observer.wait(added + n, removed + n)
    return n / (end - start)


def run_noop(spark: Any, n: int) -> float:
    df = frame(spark, n)
    start = time.perf_counter()
    df.write.format("noop").mode("overwrite").save()
    return n / (time.perf_counter() - start)


def measure(
    spark: Any, parent: str, observe_at: str, protocol: str, sizes: list[int], reps: int
) -> list[dict[str, float]]:
    """Join a leaf under ``parent``, observe at ``observe_at``; one row of medians per size."""
    results = []
    with feds.spark.join(spark, parent=parent, protocol=protocol, name="bench") as leaf:
        observer = Observer(observe_at, "<bench $id $name $x>")
        try:
            run_spark(spark, observer, 100, "bench")  # warm-up: workers, planning
            run_noop(spark, 100)
            print(
                f"{'rows':>9} {'spark r/s':>10} {'save s':>7} {'plain r/s':>10} {'noop r/s':>11}"
                f" {'spark/plain':>11} {'spark/noop':>10}  (medians of {reps})",
                flush=True,
            )
            for n in sizes:
                got: dict[str, list[float]] = {"spark": [], "save": [], "plain": [], "noop": []}
                for _ in range(reps):
                    rate, saved = run_spark(spark, observer, n, "bench")
                    got["spark"].append(rate)
                    got["save"].append(saved)
                    got["plain"].append(run_plain(leaf.client_address, observer, n, "bench"))
                    got["noop"].append(run_noop(spark, n))
                row = {k: statistics.median(v) for k, v in got.items()}
                s, p, o = row["spark"], row["plain"], row["noop"]
                print(
                    f"{n:>9} {s:>10,.0f} {row['save']:>7.1f} {p:>10,.0f} {o:>11,.0f}"
                    f" {s / p:>11.2f} {s / o:>10.4f}",
                    flush=True,
                )
                results.append({"rows": n, **row})
        finally:
            observer.close()
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="smoke run: 1000 rows, once")
    args = parser.parse_args()
    sizes, reps = ([1000], 1) if args.quick else (args.sizes, args.reps)
    overlay = Overlay()
    spark = local_session("feds spark_publish benchmark")
    try:
        addresses = overlay.addresses
        measure(spark, addresses["a1"], addresses["b2"], overlay.protocol, sizes, reps)
    finally:
        spark.stop()
        overlay.close()


if __name__ == "__main__":
    main()
