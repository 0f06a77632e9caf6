"""Presenting simulated runs: the comparison table (rich if installed, else plain) and PNG plots.

Plots need matplotlib (the ``plot`` extra); :func:`plot_results` raises :class:`PlotUnavailable`
with an installation hint when it is missing.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

from feds.sim.results import SimResult

__all__ = ["COLUMNS", "PlotUnavailable", "plot_results", "render_table", "table_rows"]

PLOT_HINT = "install the plot extra: pip install 'feds[plot]'"

COLUMNS: list[tuple[str, str, str]] = [
    # (summary key, heading, format)
    ("protocol", "protocol", "s"),
    ("events", "link events", "n"),
    ("events_up", "up", "n"),
    ("events_down", "down", "n"),
    ("bytes", "bytes", "n"),
    ("bound_edges", "bound", "n"),
    ("events_per_bound", "events/bound", "r"),
    ("bytes_per_bound", "bytes/bound", "r1"),
    ("root_peak_assertions", "root state", "n"),
    ("max_peak_assertions", "max state", "n"),
    ("max_peak_handlers", "max handlers", "n"),
    ("latency_p50", "latency p50 ms", "ms"),
    ("latency_p95", "p95 ms", "ms"),
    ("wall_seconds", "wall s", "r1"),
    ("violations", "transparent", "ok"),
]
"""The comparison table's columns; ``state`` is peak assertions in a fragment."""


def _fmt(value: Any, how: str) -> str:
    if how == "s":
        return str(value)
    if how == "ok":
        return "yes" if value == 0 else f"NO ({value})"
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if how == "n":
        return f"{value:,}"
    if how == "r":
        return f"{value:.2f}"
    if how == "r1":
        return f"{value:.1f}"
    return f"{value * 1000:.1f}"  # ms


def table_rows(results: Sequence[SimResult]) -> tuple[list[str], list[list[str]]]:
    """Headings and formatted rows of the comparison table."""
    headings = [heading for _key, heading, _how in COLUMNS]
    rows = []
    for r in results:
        s = r.summary()
        rows.append([_fmt(s[key], how) for key, _heading, how in COLUMNS])
    return headings, rows


def render_table(results: Sequence[SimResult], out: TextIO, title: str = "") -> None:
    """Print the comparison table: a rich table when rich is installed, plain text otherwise."""
    headings, rows = table_rows(results)
    try:
        from rich.console import Console
        from rich.table import Table
    except ImportError:
        _plain_table(headings, rows, out, title)
        return
    table = Table(title=title or None)
    for i, heading in enumerate(headings):
        table.add_column(heading, justify="left" if i == 0 else "right", no_wrap=i == 0)
    for row in rows:
        table.add_row(*row)
    wide = sum(max(len(h), *(len(r[i]) for r in rows)) + 3 for i, h in enumerate(headings))
    console = Console(file=out)
    if not console.is_terminal:
        console = Console(file=out, width=max(wide, len(title)) + 4)
    console.print(table)


def _plain_table(headings: list[str], rows: list[list[str]], out: TextIO, title: str) -> None:
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headings)]

    def line(cells: list[str]) -> str:
        return "  ".join(
            c.ljust(w) if i == 0 else c.rjust(w)
            for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        )

    if title:
        print(title, file=out)
    print(line(headings), file=out)
    print("  ".join("-" * w for w in widths), file=out)
    for row in rows:
        print(line(row), file=out)


def markdown_table(results: Sequence[SimResult]) -> str:
    """The comparison table as GitHub markdown (for docs)."""
    headings, rows = table_rows(results)
    lines = ["| " + " | ".join(headings) + " |", "|" + "---|" * len(headings)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


class PlotUnavailable(RuntimeError):
    """matplotlib is not installed."""


def _pyplot() -> Any:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise PlotUnavailable(f"PNG plots need matplotlib; {PLOT_HINT}") from None
    return plt


def plot_results(results: Sequence[SimResult], out: Path) -> list[Path]:
    """Write the per-run plots into ``out``; return their paths."""
    plt = _pyplot()
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name, draw in (
        ("link_events.png", _plot_link_events),
        ("state_by_depth.png", _plot_state),
        ("latency.png", _plot_latency),
    ):
        fig, ax = plt.subplots(figsize=(7, 4.5), dpi=100)
        draw(ax, results)
        fig.tight_layout()
        path = out / name
        fig.savefig(path)
        plt.close(fig)
        written.append(path)
    return written


def _plot_link_events(ax: Any, results: Sequence[SimResult]) -> None:
    for r in results:
        xs = [link.subscriptions_below for link in r.links]
        ys = [link.total("events") for link in r.links]
        ax.scatter(xs, ys, s=12, alpha=0.7, label=r.protocol)
    ax.set_xlabel("subscriptions in the subtree below the link")
    ax.set_ylabel("events on the link (both directions)")
    ax.set_title("Link events vs subscribers behind the link")
    _finish(ax)


def _plot_state(ax: Any, results: Sequence[SimResult]) -> None:
    for r in results:
        by_depth: dict[int, list[int]] = defaultdict(list)
        for node in r.node_figures:
            by_depth[node.depth].append(node.peak_assertions)
        depths = sorted(by_depth)
        ax.plot(
            depths,
            [sum(v) / len(v) for v in (by_depth[d] for d in depths)],
            marker="o",
            label=f"{r.protocol} (mean)",
        )
        ax.scatter(
            [n.depth for n in r.node_figures],
            [n.peak_assertions for n in r.node_figures],
            s=6,
            alpha=0.3,
        )
    ax.set_xlabel("node depth (0 = root)")
    ax.xaxis.get_major_locator().set_params(integer=True)
    ax.set_ylabel("peak assertions in the fragment")
    ax.set_title("State per node by depth")
    _finish(ax)


def _plot_latency(ax: Any, results: Sequence[SimResult]) -> None:
    for r in results:
        values = sorted(r.assert_latency + r.message_latency)
        if not values:
            continue
        n = len(values)
        ax.plot([v * 1000 for v in values], [(i + 1) / n for i in range(n)], label=r.protocol)
    ax.set_xlabel("delivery latency (virtual ms)")
    ax.set_ylabel("share of deliveries")
    ax.set_title("Latency distribution (CDF)")
    _finish(ax)


def _finish(ax: Any) -> None:
    ax.grid(True, alpha=0.3)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize="small")
