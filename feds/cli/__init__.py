"""The ``feds`` command line: one sub-module per command group, registered in ``COMMANDS``."""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from feds.cli import client_cmd, demo_cmd, overlay_cmd, simulate_cmd, spaces_cmd, topology_cmd

COMMANDS = [demo_cmd, overlay_cmd, client_cmd, topology_cmd, simulate_cmd, spaces_cmd]
"""Modules with ``register(subparsers)``; each parser sets ``func(args) -> int`` (the exit code)."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="feds",
        description="feds: federated dataspaces over a spanning tree of nodes.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module in COMMANDS:
        module.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return args.func(args)
    except KeyboardInterrupt:
        return 130
