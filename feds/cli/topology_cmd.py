"""``feds topology``: check topology files, show their spanning tree (text or PNG), generate."""

from __future__ import annotations

import argparse
import sys
import textwrap
from collections.abc import Callable
from typing import Any

from feds import topology as topo
from feds.topology import Topology, TopologyError

PLOT_HINT = "install the plot extra: pip install 'feds[plot]'"

_GROUP_EPILOG = """\
examples:
  feds topology check topology/*.toml
  feds topology show topology/mesh.toml
  feds topology show topology/tree15.toml --png tree15.png
  feds topology generate balanced:k=2,depth=3 -o binary15.toml

The file format is described in docs/topology.md.
exit codes: 0 ok, 1 invalid topology (or unreadable file), 2 usage error
"""

_CHECK_EPILOG = """\
Prints one line per file:
  ok: topology/star.toml: 6 nodes, root hub, protocol copy-up, depth 1
or the problem, naming the nodes or links at fault:
  error: bad.toml: node 'c' names parent 'x', which is not a node

examples:
  feds topology check topology/chain3.toml
  feds topology check topology/*.toml

exit codes: 0 all files valid, 1 some file invalid or unreadable, 2 usage error
"""

_SHOW_EPILOG = """\
Prints the spanning tree indented from the root, one node per line with its listen
address; for a graph-style file (root + [[links]]) each line also gives the cost of
the link to the node's parent.  --png draws the tree (layered by depth; links not in
the tree are dashed) and needs matplotlib: pip install 'feds[plot]'.

examples:
  feds topology show topology/binary7.toml
  feds topology show topology/mesh.toml --png mesh.png

exit codes: 0 ok, 1 invalid topology, unreadable file or missing matplotlib, 2 usage error
"""

_GENERATE_EPILOG = """\
Specs (nodes are n0, n1, ... with n0 the root; ports consecutive from --base-port):
  chain:n=10                  a path of 10 nodes
  star:n=20                   n0 plus 19 leaves
  balanced:k=3,depth=4        complete k-ary tree of the given depth
  random-tree:n=50            uniform random labelled tree (seeded)
  random-graph:n=50,p=0.1     G(n, p), made connected; the tree is its minimum spanning
                              tree (add maxcost=N for random integer costs 1..N)

examples:
  feds topology generate chain:n=5
  feds topology generate random-graph:n=12,p=0.3,maxcost=5 --seed 7 -o g12.toml

exit codes: 0 ok, 2 bad spec or usage error
"""


def register(sub: argparse._SubParsersAction) -> None:
    fmt = argparse.RawDescriptionHelpFormatter
    group = sub.add_parser(
        "topology",
        help="check, show and generate topology files",
        description="Work with topology files: which nodes exist, where they listen, and the "
        "rooted spanning tree they form.",
        epilog=_GROUP_EPILOG,
        formatter_class=fmt,
    )
    group.set_defaults(func=_usage(group))
    actions = group.add_subparsers(dest="topology_command", metavar="ACTION")

    check = actions.add_parser(
        "check",
        help="validate topology files",
        description="Validate topology files and summarise each one.",
        epilog=_CHECK_EPILOG,
        formatter_class=fmt,
    )
    check.add_argument("files", nargs="+", metavar="FILE", help="topology TOML files")
    check.set_defaults(func=run_check)

    show = actions.add_parser(
        "show",
        help="print (or draw) the spanning tree of a topology file",
        description="Print the spanning tree of a topology file, optionally drawing it.",
        epilog=_SHOW_EPILOG,
        formatter_class=fmt,
    )
    show.add_argument("file", metavar="FILE", help="a topology TOML file")
    show.add_argument("--png", metavar="OUT.png", help="also draw the tree into this PNG file")
    show.add_argument(
        "--ascii", action="store_true", help="draw the text tree with ASCII, not box characters"
    )
    show.set_defaults(func=run_show)

    gen = actions.add_parser(
        "generate",
        help="write a generated topology as TOML",
        description="Generate a topology (as the simulator does) and print it as TOML.",
        epilog=_GENERATE_EPILOG,
        formatter_class=fmt,
    )
    gen.add_argument("spec", metavar="SPEC", help="e.g. chain:n=10 or balanced:k=2,depth=3")
    gen.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    gen.add_argument(
        "--base-port", type=int, default=7400, help="port of n0; n<i> gets base+i (default 7400)"
    )
    gen.add_argument(
        "--protocol",
        choices=topo.PROTOCOLS,
        default=topo.DEFAULT_PROTOCOL,
        help=f"federation protocol (default {topo.DEFAULT_PROTOCOL})",
    )
    gen.add_argument("-o", "--output", metavar="FILE", help="write here instead of stdout")
    gen.set_defaults(func=run_generate)


def _usage(parser: argparse.ArgumentParser) -> Callable[[argparse.Namespace], int]:
    def show_usage(args: argparse.Namespace) -> int:
        parser.print_help(sys.stderr)
        return 2

    return show_usage


def _load(path: str) -> Topology | None:
    """Load ``path`` or print why not (to stderr) and return None."""
    try:
        return topo.load(path)
    except TopologyError as exc:
        print(f"error: {exc}", file=sys.stderr)
    except OSError as exc:
        print(f"error: {path}: cannot read: {exc.strerror or exc}", file=sys.stderr)
    except UnicodeDecodeError as exc:
        print(f"error: {path}: not UTF-8 text: {exc.reason}", file=sys.stderr)
    return None


def summary(path: str, t: Topology) -> str:
    """``FILE: N nodes, root R, protocol P, depth D`` (the line ``check`` prints after ok:)."""
    return f"{path}: {len(t)} nodes, root {t.root}, protocol {t.protocol}, depth {t.height()}"


def run_check(args: argparse.Namespace) -> int:
    status = 0
    for path in args.files:
        t = _load(path)
        if t is None:
            status = 1
        else:
            print(f"ok: {summary(path, t)}")
    return status


def _number(x: float) -> str:
    return f"{x:g}"


def tree_lines(t: Topology, *, ascii_only: bool = False) -> list[str]:
    """The tree as indented text lines: name, listen address, and the link cost if known."""
    if ascii_only:
        tee, last, bar, gap = "|-- ", "`-- ", "|   ", "    "
    else:
        tee, last, bar, gap = "├── ", "└── ", "│   ", "    "
    rows: list[tuple[str, str]] = []
    stack: list[tuple[str, str, str]] = [(t.root, "", "")]
    while stack:
        name, prefix, branch = stack.pop()
        spec = t.nodes[name]
        info = spec.listen
        cost = t.edge_cost(name)
        if cost is not None:
            info += f"  cost {_number(cost)}"
        if t.spaces is not None and t.spaces.of(name):
            info += "  gates " + " ".join(t.spaces.of(name))
        if spec.description:
            info += f"  # {spec.description}"
        rows.append((prefix + branch + name, info))
        inner = prefix + ("" if not branch else (gap if branch == last else bar))
        kids = t.children(name)
        for i in reversed(range(len(kids))):
            stack.append((kids[i], inner, last if i == len(kids) - 1 else tee))
    width = max(len(label) for label, _ in rows)
    return [f"{label.ljust(width)}  {info}".rstrip() for label, info in rows]


def _can_encode(text: str) -> bool:
    try:
        text.encode(sys.stdout.encoding or "ascii")
    except (UnicodeEncodeError, LookupError):
        return False
    return True


def run_show(args: argparse.Namespace) -> int:
    t = _load(args.file)
    if t is None:
        return 1
    head = summary(args.file, t)
    if t.links is not None:
        total = t.total_cost() or 0.0
        unused = len(t.links) - (len(t) - 1)
        head += f", tree cost {_number(total)} ({len(t.links)} links, {unused} not in the tree)"
    if t.spaces is not None and t.spaces.spaces:
        head += ", spaces " + ", ".join(f"{n} ({k})" for n, k in t.spaces.spaces.items())
    print(head)
    ascii_only = args.ascii or not _can_encode("├└│─")
    for line in tree_lines(t, ascii_only=ascii_only):
        print(line)
    if args.png:
        try:
            draw_png(t, args.png, title=head)
        except ImportError:
            print(f"error: drawing needs matplotlib: {PLOT_HINT}", file=sys.stderr)
            return 1
        except OSError as exc:
            print(f"error: {args.png}: cannot write: {exc.strerror or exc}", file=sys.stderr)
            return 1
        print(f"wrote {args.png}")
    return 0


def _preorder(t: Topology) -> list[str]:
    out: list[str] = []
    stack = [t.root]
    while stack:
        name = stack.pop()
        out.append(name)
        stack.extend(reversed(t.children(name)))
    return out


def layout(t: Topology) -> dict[str, tuple[float, float]]:
    """Layered positions: y = -depth; leaves at consecutive x in depth-first order, each parent
    centred over its first and last child."""
    xs: dict[str, float] = {}
    nodes = _preorder(t)
    leaf = 0.0
    for name in nodes:
        if not t.children(name):
            xs[name] = leaf
            leaf += 1.0
    for name in reversed(nodes):
        kids = t.children(name)
        if kids:
            xs[name] = (xs[kids[0]] + xs[kids[-1]]) / 2
    return {name: (xs[name], -float(t.depth(name))) for name in nodes}


def draw_png(t: Topology, out: str, *, title: str | None = None) -> None:
    """Draw the tree to ``out`` with matplotlib (ImportError if it is not installed)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    pos = layout(t)
    width = max(x for x, _ in pos.values()) + 1
    height = t.height() + 1
    fig_width = min(max(2 + 1.3 * width, 5.0), 60.0)
    fig = Figure(figsize=(fig_width, min(1.5 + 1.4 * height, 40.0)))
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    ax.set_axis_off()
    tree_pairs = {frozenset((n, s.parent)) for n, s in t.nodes.items() if s.parent is not None}
    for link in t.links or ():
        if frozenset((link.a, link.b)) in tree_pairs:
            continue
        # bowed, so that a spare link never hides under a tree edge on the same line
        arc = {"arrowstyle": "-", "linestyle": "--", "color": "0.7", "linewidth": 1}
        arc["connectionstyle"] = "arc3,rad=0.25"
        ax.annotate("", xy=pos[link.b], xytext=pos[link.a], arrowprops=arc, zorder=1)
    for name, spec in t.nodes.items():
        if spec.parent is None:
            continue
        (x1, y1), (x2, y2) = pos[spec.parent], pos[name]
        ax.plot([x1, x2], [y1, y2], color="0.2", linewidth=1.5, zorder=2)
        cost = t.edge_cost(name)
        if cost is not None:
            style: dict[str, Any] = {"boxstyle": "round,pad=0.15", "fc": "white", "ec": "none"}
            ax.text(
                (x1 + x2) / 2, (y1 + y2) / 2, _number(cost), fontsize=7, color="0.3",
                ha="center", va="center", bbox=style, zorder=3,
            )  # fmt: skip
    for name, (x, y) in pos.items():
        color = "#f6c85f" if name == t.root else "#9dd9f3"
        ax.text(
            x, y, name, ha="center", va="center", fontsize=9, zorder=4,
            bbox={"boxstyle": "round,pad=0.3", "fc": color, "ec": "0.3"},
        )  # fmt: skip
        ax.text(
            x, y - 0.13, t.nodes[name].listen, ha="center", va="top", fontsize=6, zorder=4,
            bbox={"boxstyle": "round,pad=0.1", "fc": "white", "ec": "none", "alpha": 0.8},
        )  # fmt: skip
    ax.set_xlim(-0.7, width - 0.3)
    ax.set_ylim(-height + 0.4, 0.5)
    if title:
        ax.set_title(textwrap.fill(title, width=max(int(fig_width * 13), 30)), fontsize=9)
    fig.tight_layout()
    fig.savefig(out, dpi=120)


def run_generate(args: argparse.Namespace) -> int:
    try:
        t = topo.generate(args.spec, args.seed, protocol=args.protocol, base_port=args.base_port)
    except TopologyError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    text = topo.dumps(t)
    if args.output:
        try:
            with open(args.output, "w", encoding="utf-8") as f:
                f.write(f"# generated by: feds topology generate {args.spec} --seed {args.seed}\n")
                f.write(text)
        except OSError as exc:
            print(f"error: {args.output}: cannot write: {exc.strerror or exc}", file=sys.stderr)
            return 1
        print(f"wrote {args.output}: {len(t)} nodes, depth {t.height()}")
    else:
        sys.stdout.write(text)
    return 0
