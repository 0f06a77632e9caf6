"""Rows per second from a Spark job into a feds overlay, end to end, against two peers.

The overlay is binary7 (``topology/binary7.toml`` on free ports, with ``max-client-handles``
raised so that one client may publish 10^6 rows), one ``feds node`` process per node. This
process is the Spark driver (``local[2]``); its leaf joins under ``a1`` (:func:`feds.spark.join`
with the topology), and an observer at ``b2``, in the other subtree, counts the rows of
``<bench $id $name $x>`` as they arrive (five nodes away). For each size N, the same rows
(``id``, ``"row-<id>"``, ``id / 2``) are published three ways, ``--reps`` times, interleaved in
an order that rotates from one repetition to the next:

* **spark**: ``df.write.format("feds")`` (tasks stage at the leaf, the commit publishes all N in
  one turn), timed from ``save()`` until the observer has seen the N-th row (``save s``: until
  ``save()`` returned, that is until the leaf had applied the commit);
* **plain**: a Python ``BlockingClient.publish_many`` of the same N records into the same leaf
  node, timed from the call until the observer has seen the N-th row;
* **noop**: Spark's own ``format("noop")`` sink on the same DataFrame (Spark alone, no overlay).

Between repetitions the rows are withdrawn (and the observer sees them go). Reported: median
rows/s of each; spark/plain, the median of the per-repetition ratios (both paths of one
repetition run back to back under the same machine load) with their range (the target is
>= 0.7: Spark adds little on top of the overlay); and spark/noop (what the overlay costs a Spark
job). A line per repetition, and progress every 10 s of a long wait, go to stderr::

    .venv/bin/python benchmarks/spark_publish.py                     # 10^4, 10^5, 10^6 rows
    .venv/bin/python benchmarks/spark_publish.py --sizes 10000 100000 --reps 5
    .venv/bin/python benchmarks/spark_publish.py --quick             # smoke run: 1000 rows, once

Needs the ``spark`` extra and Java 17 or 21.
"""

from __future__ import annotations

import argparse
import contextlib
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import trio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import feds.spark
from feds.blocking import BlockingClient
from feds.client import connect
from feds.spark.session import local_session
from feds.topology import load
from feds.values import record

ROOT = Path(__file__).resolve().parent.parent
TOPOLOGY = ROOT / "topology" / "binary7.toml"
TIMEOUT = 1800.0
"""Seconds any one wait may take before the benchmark gives up."""
CLIENT_HANDLES = 2_000_000
"""Live handles one client connection may hold (the default, 100,000, is below 10^6)."""
PROGRESS = 10.0
"""Seconds between progress lines while waiting for the observer."""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Overlay:
    """binary7 as seven ``feds node`` processes (a real deployment: every node has a process
    and a scheduler of its own) on free ports; ``addresses`` maps node names to ``host:port``.

    (``feds up`` would run all seven in one process: every row would then cross five nodes on
    one core, and a node's reader waits until the whole process is idle before it reads again,
    which under load left the leaf's link untaken for seconds.)
    """

    def __init__(self) -> None:
        self.directory = tempfile.TemporaryDirectory(prefix="feds-spark-bench-")
        text = TOPOLOGY.read_text()
        for port in re.findall(r"port = (\d+)", text):
            text = text.replace(f"port = {port}", f"port = {free_port()}")
        # The plain path publishes all N rows from one client: let a client hold them all.
        text += f"\n[limits]\nmax-client-handles = {CLIENT_HANDLES}\n"
        path = self.topology = Path(self.directory.name) / "binary7.toml"
        path.write_text(text)
        topology = load(path)
        self.protocol = topology.protocol
        self.addresses = {n: "{}:{}".format(*topology.address(n)) for n in topology.nodes}
        self.processes = []
        for name in topology.order():
            command = [sys.executable, "-m", "feds.cli", "node", str(path), "--name", name]
            process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True, cwd=ROOT)
            self.processes.append(process)
            assert process.stdout is not None
            if not process.stdout.readline().startswith(f"node {name} listening"):
                self.close()
                raise SystemExit(f"feds node {name} did not start")

    def close(self) -> None:
        for process in self.processes:
            process.terminate()
        for process in self.processes:
            process.wait(10)
        self.directory.cleanup()


class Observer:
    """Counts the + and - events of one pattern at one node, in a trio thread of its own.

    Events are taken in batches (one lock per batch, not per event). ``wait`` blocks until the
    counts are reached, prints progress on long waits, and fails at once with the reason if the
    observation ends (a lost connection), instead of waiting for a count that cannot come.
    """

    def __init__(self, address: str, pattern: str) -> None:
        self.added = self.removed = 0
        self.last = 0.0
        self.error: BaseException | None = None
        self.changed = threading.Condition()
        self.ready = threading.Event()
        self.scope: trio.CancelScope | None = None
        self.token: trio.lowlevel.TrioToken | None = None
        self.thread = threading.Thread(target=self._main, args=(address, pattern), daemon=True)
        self.thread.start()
        if not self.ready.wait(30) or self.error is not None:
            raise SystemExit(f"the observer did not start: {self.error}")

    def _main(self, address: str, pattern: str) -> None:
        try:
            trio.run(self._run, address, pattern)
        except BaseException as exc:  # handed to the waiting thread
            self.error = exc
        finally:
            self.ready.set()
            with self.changed:
                self.changed.notify_all()

    async def _run(self, address: str, pattern: str) -> None:
        self.token = trio.lowlevel.current_trio_token()
        with trio.CancelScope() as self.scope:
            async with (
                connect(address, name="observer", timeout=TIMEOUT) as session,
                session.observe(pattern) as events,
            ):
                await session.sync(TIMEOUT)
                self.ready.set()
                async for first in events:
                    batch = [first, *events.take()]
                    added = sum(1 for event in batch if event.kind == "+")
                    with self.changed:
                        self.added += added
                        self.removed += len(batch) - added
                        self.last = time.perf_counter()
                        self.changed.notify_all()
        if not self.scope.cancelled_caught:
            raise RuntimeError("the observation ended")

    def wait(self, added: int, removed: int = 0, what: str = "") -> float:
        """Block until the counts are reached; return when the last of those events came."""
        start = time.monotonic()
        report = start + PROGRESS
        with self.changed:
            while self.added < added or self.removed < removed:
                if self.error is not None:
                    raise SystemExit(f"the observer failed: {self.error!r}")
                now = time.monotonic()
                if now > start + TIMEOUT:
                    raise SystemExit(
                        f"timed out: {self.added}/{added} +, {self.removed}/{removed} -"
                    )
                if now >= report:
                    print(
                        f"    {what}: {self.added:,}/{added:,} +, {self.removed:,}/{removed:,} -"
                        f" seen after {now - start:.0f} s",
                        file=sys.stderr,
                        flush=True,
                    )
                    report = now + PROGRESS
                self.changed.wait(min(1.0, report - now))
            return self.last

    def close(self) -> None:
        if self.token is not None and self.scope is not None:
            with contextlib.suppress(trio.RunFinishedError):
                trio.from_thread.run_sync(self.scope.cancel, trio_token=self.token)
        self.thread.join(10)


def frame(spark: Any, n: int) -> Any:
    return spark.range(n).selectExpr("id", "concat('row-', id) AS name", "id / 2 AS x")


def run_spark(spark: Any, observer: Observer, n: int, label: str) -> dict[str, float]:
    """Rows/s end to end, and the seconds ``save()`` took (staging, and the commit applied)."""
    df = frame(spark, n)
    added, removed = observer.added, observer.removed
    start = time.perf_counter()
    df.write.format("feds").option("publication", label).mode("append").save()
    saved = time.perf_counter() - start
    end = observer.wait(added + n, what=f"spark {n:,}")
    df.limit(0).write.format("feds").option("publication", label).mode("overwrite").save()
    observer.wait(added + n, removed + n, what=f"spark {n:,} withdrawn")
    return {"spark": n / (end - start), "save": saved}


def run_plain(address: str, observer: Observer, n: int, label: str) -> dict[str, float]:
    """Rows/s end to end of one ``publish_many`` of the same records into the same leaf."""
    rows = [record(label, i, f"row-{i}", i / 2) for i in range(n)]
    added, removed = observer.added, observer.removed
    with BlockingClient(address, name="plain publisher", timeout=TIMEOUT) as client:
        start = time.perf_counter()
        client.publish_many(rows)
        end = observer.wait(added + n, what=f"plain {n:,}")
    observer.wait(added + n, removed + n, what=f"plain {n:,} withdrawn")
    return {"plain": n / (end - start)}


def run_noop(spark: Any, n: int) -> dict[str, float]:
    """Rows/s of Spark's own ``noop`` sink on the same DataFrame (Spark alone)."""
    df = frame(spark, n)
    start = time.perf_counter()
    df.write.format("noop").mode("overwrite").save()
    return {"noop": n / (time.perf_counter() - start)}


HEADER = (
    f"{'rows':>9} {'spark r/s':>10} {'save s':>7} {'plain r/s':>10} {'noop r/s':>11}"
    f" {'spark/plain':>11} {'(min-max)':>11} {'spark/noop':>10}"
)


def summary(n: int, got: dict[str, list[float]]) -> dict[str, float]:
    """Medians of one size; ``ratio`` is the median of the per-repetition spark/plain ratios
    (each repetition runs both paths back to back, so machine load affects both alike)."""
    ratios = [s / p for s, p in zip(got["spark"], got["plain"], strict=True)]
    row = {"rows": n, **{k: statistics.median(v) for k, v in got.items()}}
    row.update(ratio=statistics.median(ratios), low=min(ratios), high=max(ratios))
    print(
        f"{n:>9} {row['spark']:>10,.0f} {row['save']:>7.1f} {row['plain']:>10,.0f}"
        f" {row['noop']:>11,.0f} {row['ratio']:>11.2f} {row['low']:>5.2f}-{row['high']:<5.2f}"
        f" {row['spark'] / row['noop']:>10.4f}",
        flush=True,
    )
    return row


def measure(
    spark: Any,
    parent: str,
    observe_at: str,
    protocol: str,
    sizes: list[int],
    reps: int,
    topology: str | None = None,
) -> list[dict[str, float]]:
    """Join a leaf under ``parent``, observe at ``observe_at`` (addresses); one row of medians
    per size. ``topology`` (a file) gives the leaf its limits.

    The paths run interleaved, in an order that rotates from one repetition to the next (so no
    path always runs first, on a fresh or a tired machine); a line per repetition goes to stderr.
    """
    results = []
    joined = feds.spark.join(
        spark, parent=parent, protocol=protocol, topology=topology, name="bench"
    )
    with joined as leaf:
        observer = Observer(observe_at, "<bench $id $name $x>")
        try:
            run_spark(spark, observer, 100, "bench")  # warm-up: workers, planning
            run_noop(spark, 100)
            paths: list[Callable[[int], dict[str, float]]] = [
                lambda n: run_spark(spark, observer, n, "bench"),
                lambda n: run_plain(leaf.client_address, observer, n, "bench"),
                lambda n: run_noop(spark, n),
            ]
            print(f"{HEADER}  (medians of {reps})", flush=True)
            for n in sizes:
                got: dict[str, list[float]] = {"spark": [], "save": [], "plain": [], "noop": []}
                for rep in range(reps):
                    began = time.monotonic()
                    for path in paths[rep % 3 :] + paths[: rep % 3]:
                        for key, value in path(n).items():
                            got[key].append(value)
                    print(
                        f"    {n:,} rows, repetition {rep + 1}/{reps}:"
                        f" spark {got['spark'][-1]:,.0f}, plain {got['plain'][-1]:,.0f},"
                        f" noop {got['noop'][-1]:,.0f} rows/s"
                        f" ({time.monotonic() - began:.0f} s)",
                        file=sys.stderr,
                        flush=True,
                    )
                results.append(summary(n, got))
        finally:
            observer.close()
    return results


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--sizes",
        type=int,
        nargs="+",
        default=[10_000, 100_000, 1_000_000],
        metavar="N",
        help="rows per write (default: 10000 100000 1000000)",
    )
    parser.add_argument(
        "--reps", type=int, default=5, help="repetitions per size, interleaved (default: 5)"
    )
    parser.add_argument("--quick", action="store_true", help="smoke run: 1000 rows, once")
    args = parser.parse_args()
    sizes, reps = ([1000], 1) if args.quick else (args.sizes, args.reps)
    overlay = Overlay()
    spark = local_session("feds spark_publish benchmark")
    try:
        addresses = overlay.addresses
        topology = str(overlay.topology)
        measure(spark, addresses["a1"], addresses["b2"], overlay.protocol, sizes, reps, topology)
    finally:
        spark.stop()
        overlay.close()


if __name__ == "__main__":
    main()
