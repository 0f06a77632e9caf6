"""``feds simulate``: run the real node and protocol code over counted virtual links, compare.

The command builds the overlay from a topology file or a generator spec, runs a seeded
workload with each chosen protocol (:func:`feds.sim.simulate`), prints the comparison table,
and with ``--out`` writes CSV/JSON of every figure plus PNG plots (with the ``plot`` extra).
Every run is checked for transparency; a violation makes the command fail (exit 1).
"""

from __future__ import annotations

import argparse
import json
import logging
import re
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from feds import topology as topo
from feds.protocols import protocol_names
from feds.sim.network import LinkParams
from feds.sim.report import PlotUnavailable, plot_results, render_table
from feds.sim.results import SimResult, json_safe, write_outputs
from feds.sim.runner import simulate
from feds.sim.workload import (
    PLACEMENTS,
    WorkloadError,
    WorkloadSpec,
    field_help,
    load_workload,
)
from feds.topology import Topology, TopologyError

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2

_EPILOG = """\
examples:
  feds simulate --generate balanced:k=3,depth=3
  feds simulate --generate random-tree:n=50 --protocol aggregate-subs --seed 7
  feds simulate --topology topology/tree15.toml --workload examples/workloads/presence.toml
  feds simulate --generate chain:n=5 --events 200 --messages 1 --latency 5 --out sim-out
  feds simulate --generate star:n=20 --subscribers 19 --subscriber-placement leaves \\
      --topics 1 --bandwidth 1M --out star-out

Topology generator specs: chain:n=10, star:n=20, balanced:k=3,depth=4, random-tree:n=50,
random-graph:n=50,p=0.1 (its minimum spanning tree). Workload keys may come from a TOML file
(--workload, see examples/workloads/) and be overridden one by one with the workload options.

Output: the comparison table on stdout (--json: the summaries as JSON). With --out DIR:
summary.csv, links.csv, nodes.csv, latency.csv, results.json and, with matplotlib installed
(pip install 'feds[plot]'), link_events.png, state_by_depth.png and latency.png.

Every run checks transparency at quiescence: each observer's view must equal what one
dataspace would show, and messages arrive exactly once.

exit codes: 0 ok, 1 transparency violation or error, 2 usage error (bad option, spec or file)
"""


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "simulate",
        help="compare the protocols by simulating an overlay in virtual time",
        description="Run the real nodes and protocols of a topology over virtual links with "
        "latency and bandwidth, drive a seeded workload, and report link traffic, node state, "
        "delivery latency and the lower bound, per protocol.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    where = p.add_mutually_exclusive_group(required=True)
    where.add_argument("--topology", metavar="FILE", help="a topology TOML file")
    where.add_argument("--generate", metavar="SPEC", help="a generator spec (see below)")
    p.add_argument(
        "--protocol",
        default="all",
        choices=[*protocol_names(), "all"],
        help="the protocol to run, or all of them (default: all)",
    )
    p.add_argument("--workload", metavar="FILE", help="a workload TOML file")
    p.add_argument("--seed", type=int, default=0, help="seed of the workload and generator")
    p.add_argument("--out", metavar="DIR", type=Path, help="write CSV, JSON and PNG files here")
    p.add_argument(
        "--latency",
        metavar="MS",
        type=_non_negative,
        default=1.0,
        help="one-way link latency in milliseconds (default: 1)",
    )
    p.add_argument(
        "--bandwidth",
        metavar="BYTES/S",
        type=_bandwidth,
        default=0.0,
        help="link bandwidth per direction in bytes/s, suffixes k, M, G (default: 0, unlimited)",
    )
    p.add_argument("--json", action="store_true", help="print the summaries as JSON, no table")
    p.add_argument("--no-plots", action="store_true", help="do not draw PNG plots with --out")
    p.add_argument(
        "--progress",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="show a progress bar on stderr (default: when stderr is a terminal)",
    )
    p.add_argument("-v", "--verbose", action="store_true", help="log warnings from the nodes")
    _workload_options(p.add_argument_group("workload (override the file's keys)"))
    p.set_defaults(func=run)


def _workload_options(group: argparse._ArgumentGroup) -> None:
    for name, (kind, default, text) in field_help().items():
        if name == "description":
            continue
        flag = "--" + name.replace("_", "-")
        extra: dict[str, Any] = {}
        if name.endswith("placement"):
            extra["choices"] = PLACEMENTS
        elif name == "kind":
            extra["choices"] = ("topics", "presence")
        else:
            extra["metavar"] = "N" if kind is int else "X"
        group.add_argument(
            flag, dest=f"wl_{name}", type=kind, help=f"{text} (default {default})", **extra
        )


def _non_negative(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"must be >= 0: {text!r}")
    return value


_SUFFIX = {"": 1.0, "k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9}


def _bandwidth(text: str) -> float:
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([kKMG]?)\s*", text)
    if not m:
        raise argparse.ArgumentTypeError(f"expected a number of bytes/s such as 1M, not {text!r}")
    return float(m.group(1)) * _SUFFIX[m.group(2)]


# ------------------------------------------------------------------------------------------


class _Usage(Exception):
    pass


def _topology(args: argparse.Namespace) -> tuple[Topology, str]:
    try:
        if args.topology:
            return topo.load(args.topology, allow_ephemeral=True), args.topology
        return topo.generate(args.generate, args.seed, base_port=0), args.generate
    except TopologyError as e:
        raise _Usage(str(e)) from None
    except OSError as e:
        raise _Usage(f"{args.topology}: cannot read: {e.strerror}") from None


def _workload(args: argparse.Namespace) -> WorkloadSpec:
    try:
        spec = load_workload(args.workload) if args.workload else WorkloadSpec()
        overrides = {k[3:]: v for k, v in vars(args).items() if k.startswith("wl_")}
        return spec.with_overrides(**overrides)
    except WorkloadError as e:
        raise _Usage(f"workload: {e}") from None


class _ProgressBar:
    """A progress display on stderr: rich's bar if available, else one rewritten line."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self._rich: Any = None
        self._task: Any = None
        self._label = ""
        self._started = 0.0
        self._shown = 0.0

    def __enter__(self) -> _ProgressBar:
        if self.enabled:
            try:
                from rich.progress import Progress

                self._rich = Progress(transient=True, console=_stderr_console())
                self._rich.start()
            except ImportError:
                self._rich = None
        return self

    def __exit__(self, *exc: object) -> None:
        if self._rich is not None:
            self._rich.stop()

    def run(self, label: str) -> Callable[[int, int], None] | None:
        """A ``progress(done, total)`` callback for one run (None when disabled)."""
        if not self.enabled:
            return None
        self._label, self._started = label, time.monotonic()
        if self._rich is not None:
            self._task = self._rich.add_task(label, total=None)
        return self._update

    def _update(self, done: int, total: int) -> None:
        if self._rich is not None:
            self._rich.update(self._task, completed=done, total=total)
            if done >= total:
                self._rich.remove_task(self._task)
            return
        now = time.monotonic()
        if done < total and now - self._shown < 0.5:
            return
        self._shown = now
        elapsed = now - self._started
        end = "\n" if done >= total else ""
        percent = 100 * done / total if total else 100
        sys.stderr.write(f"\r{self._label}: {percent:5.1f}% ({elapsed:.0f}s){end}")
        sys.stderr.flush()


def _stderr_console() -> Any:
    from rich.console import Console

    return Console(file=sys.stderr)


def run(args: argparse.Namespace) -> int:
    try:
        topology, label = _topology(args)
        spec = _workload(args)
        link = LinkParams(latency=args.latency / 1000.0, bandwidth=args.bandwidth)
    except (_Usage, ValueError) as e:
        print(f"feds simulate: {e}", file=sys.stderr)
        return EXIT_USAGE
    # Quiet while it runs, and only then: called in-process (by the tests), a level left set
    # would hide every later feds warning (a lost uplink, a keep-alive cut) in that process.
    log = logging.getLogger("feds")
    level = log.level
    log.setLevel(logging.WARNING if args.verbose else logging.CRITICAL)
    try:
        return _simulate(args, topology, label, spec, link)
    finally:
        log.setLevel(level)


def _simulate(
    args: argparse.Namespace, topology: Topology, label: str, spec: WorkloadSpec, link: LinkParams
) -> int:
    protocols = list(protocol_names()) if args.protocol == "all" else [args.protocol]
    show = sys.stderr.isatty() if args.progress is None else args.progress
    results: list[SimResult] = []
    try:
        with _ProgressBar(show) as bar:
            for name in protocols:
                result = simulate(
                    topology,
                    name,
                    spec,
                    seed=args.seed,
                    link=link,
                    progress=bar.run(f"{name} on {label}"),
                    strict=False,
                )
                result.topology = label
                results.append(result)
    except Exception as e:  # an internal error: say so plainly, no traceback without -v
        if args.verbose:
            raise
        print(f"feds simulate: error: {e!r}", file=sys.stderr)
        return EXIT_FAILED
    _print(results, args, topology, label)
    status = _outputs(results, args)
    return _report_violations(results) or status


def _print(
    results: list[SimResult], args: argparse.Namespace, topology: Topology, label: str
) -> None:
    if args.json:
        print(json.dumps(json_safe([r.summary() for r in results]), indent=1))
        return
    title = (
        f"{label}: {len(topology)} nodes, height {topology.height()}, seed {args.seed}, "
        f"{results[0].bound.events:,} published events"
    )
    render_table(results, sys.stdout, title)


def _outputs(results: list[SimResult], args: argparse.Namespace) -> int:
    if args.out is None:
        return EXIT_OK
    try:
        paths = write_outputs(results, args.out)
    except OSError as e:
        print(f"feds simulate: cannot write to {args.out}: {e.strerror}", file=sys.stderr)
        return EXIT_FAILED
    if not args.no_plots:
        try:
            paths += plot_results(results, args.out)
        except PlotUnavailable as e:
            print(f"feds simulate: plots skipped: {e}", file=sys.stderr)
    print(f"wrote {', '.join(p.name for p in paths)} to {args.out}", file=sys.stderr)
    return EXIT_OK


def _report_violations(results: list[SimResult]) -> int:
    bad = [r for r in results if r.violations]
    for r in bad:
        print(
            f"\nTRANSPARENCY VIOLATION: {r.protocol} — {len(r.violations)} problem(s); "
            "the overlay did not behave like one dataspace:",
            file=sys.stderr,
        )
        for line in r.violations[:20]:
            print(f"  {line}", file=sys.stderr)
        if len(r.violations) > 20:
            print(f"  ... and {len(r.violations) - 20} more", file=sys.stderr)
    return EXIT_FAILED if bad else EXIT_OK
