"""``feds up`` (a whole topology in one process) and ``feds node`` (one node of it)."""

from __future__ import annotations

import argparse
from dataclasses import replace

import trio

from feds import topology as topo
from feds.auth import AuthError, Secrets
from feds.cli.common import (
    UsageError,
    add_verbosity,
    run_guarded,
    run_trio,
    setup_logging,
)
from feds.driver import Driver
from feds.gc_pauses import node_collection
from feds.protocols import protocol_names
from feds.runtime import NodeRuntime, Overlay, run_overlay
from feds.spaces.node_gates import listing, serve_node_gates
from feds.spaces.uri import parse_uri


def register(sub: argparse._SubParsersAction) -> None:
    up = sub.add_parser(
        "up",
        help="run every node of a topology in this process",
        description="Run every node of TOPOLOGY in this one process (links in memory), each "
        "listening on TCP at its address so clients and tools can attach; nodes with gates in "
        "the topology serve its [spaces] behind them (docs/tuplespaces.md). Ctrl-C or SIGTERM "
        "stops.",
        epilog="example: feds up topology/binary7.toml --protocol copy-up",
    )
    up.add_argument("topology", help="a topology file (see docs/topology.md)")
    up.add_argument("--protocol", choices=protocol_names(), help="override the file's protocol")
    up.add_argument(
        "--any-port", action="store_true", help="listen (nodes and gates) on free ports instead"
    )
    add_verbosity(up)
    up.set_defaults(func=lambda a: run_guarded(_up, a))

    node = sub.add_parser(
        "node",
        help="run one node of a topology",
        description="Run the node NAME of TOPOLOGY: listen at its address and keep a link to "
        "its parent (re-dialing with backoff if the parent is away). If the node has gates "
        "in the topology, serve the topology's [spaces] behind them (a federated space through "
        "this node's fragment; docs/tuplespaces.md). Prints 'node NAME listening on HOST:PORT', "
        "then 'gate URI spaces NAME(KIND) ...' per gate. Ctrl-C or SIGTERM stops (and closes "
        "the gates).",
        epilog="example: feds node topology/chain3.toml --name middle",
    )
    node.add_argument("topology", help="a topology file (see docs/topology.md)")
    node.add_argument("--name", required=True, help="which node of the topology to run")
    node.add_argument("--protocol", choices=protocol_names(), help="override the file's protocol")
    add_verbosity(node)
    node.set_defaults(func=lambda a: run_guarded(_node, a))


def _load(path: str) -> topo.Topology:
    try:
        topology = topo.load(path)
        if topology.secret_file is not None:
            Secrets.load(topology.secret_file)  # a bad secret file is a usage error, up front
        return topology
    except (topo.TopologyError, AuthError, OSError) as exc:
        raise UsageError(str(exc)) from None


def _say(line: str) -> None:
    print(line, flush=True)


async def _start_gates(
    nursery: trio.Nursery,
    runtime: NodeRuntime,
    driver: Driver,
    topology: topo.Topology,
    any_port: bool = False,
) -> None:
    """Start the gates the topology gives ``runtime``'s node (if any) and say where they are."""
    declared = topology.spaces
    uris = declared.of(runtime.name) if declared is not None else ()
    if not uris:
        return
    if any_port:
        uris = tuple(replace(parse_uri(uri), port=0).gate() for uri in uris)
    gates = await nursery.start(serve_node_gates, runtime, driver, declared, uris)
    for gate in gates:
        _say(f"gate {gate.uri} spaces {listing(declared)}")


def _up(args: argparse.Namespace) -> int:
    setup_logging(args)
    topology = _load(args.topology)

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            overlay: Overlay = await nursery.start(
                lambda task_status: run_overlay(
                    topology,
                    protocol=args.protocol,
                    any_port=args.any_port,
                    task_status=task_status,
                )
            )
            protocol = args.protocol or topology.protocol
            _say(f"feds up: {len(topology.nodes)} nodes, protocol {protocol}")
            for name in topology.order():
                parent = topology.nodes[name].parent
                where = f"child of {parent}" if parent else "root"
                _say(f"node {name} listening on {overlay.address(name)} ({where})")
                runtime = overlay.runtimes[name]
                await _start_gates(nursery, runtime, overlay.driver, topology, args.any_port)

    with node_collection():  # see feds.gc_pauses
        return run_trio(main)


def _node(args: argparse.Namespace) -> int:
    setup_logging(args)
    topology = _load(args.topology)
    if args.name not in topology.nodes:
        raise UsageError(
            f"no node {args.name!r} in {args.topology}; nodes: {', '.join(topology.nodes)}"
        )
    spec = topology.nodes[args.name]

    async def main() -> None:
        driver = Driver(at_step_end=False)  # a node's reader tasks run their packets' turns
        runtime = NodeRuntime.from_topology(driver.scheduler, topology, spec.name, args.protocol)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(driver.run)
            nursery.start_soon(runtime.watch)
            port = await nursery.start(runtime.serve, spec.host, spec.port)
            _say(f"node {spec.name} listening on {spec.host}:{port}")
            if spec.parent is not None:
                host, parent_port = topology.address(spec.parent)
                nursery.start_soon(runtime.uplink_tcp, host, parent_port)
            await _start_gates(nursery, runtime, driver, topology)

    with node_collection():  # see feds.gc_pauses
        return run_trio(main)
