"""``feds demo``: the README's main job (placeholder until the engine lands)."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("demo", help="run the built-in demonstration")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    print("feds demo: engine under construction")
    return 0
