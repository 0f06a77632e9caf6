"""``feds spaces serve``: a pSpaces space repository behind one or more gates."""

from __future__ import annotations

import argparse

import trio

from feds.cli.common import UsageError, add_verbosity, run_guarded, run_trio, setup_logging
from feds.spaces import Kind, Space, SpaceRepository, UriError
from feds.spaces.uri import parse_uri

KINDS = ", ".join(k.value for k in Kind)


def register(sub: argparse._SubParsersAction) -> None:
    spaces = sub.add_parser(
        "spaces",
        help="pSpaces tuple spaces (jSpace-compatible gates)",
        description="Tuple spaces speaking jSpace's pSpaces protocol (docs/tuplespaces.md).",
    )
    commands = spaces.add_subparsers(dest="spaces_command", metavar="COMMAND", required=True)
    serve = commands.add_parser(
        "serve",
        help="serve named spaces behind gates",
        description="Run a space repository with the --space spaces behind every GATE until "
        "Ctrl-C. A gate URI is tcp://HOST[:PORT]/?keep or ?conn (port 31415 by default, port 0 "
        "picks a free one; mode keep by default, any case, ?mode=keep also accepted). Clients "
        "(jSpace's RemoteSpace, feds.spaces.RemoteSpace) address a space as "
        "tcp://HOST:PORT/NAME?keep. Once listening, prints one line per gate: "
        "'gate tcp://HOST:PORT/?MODE spaces NAME(KIND) ...'.",
        epilog="example: feds spaces serve 'tcp://127.0.0.1:31415/?keep' --space seq=sequential "
        "--space queue=queue --space stack=stack --space pile=pile",
    )
    serve.add_argument("gates", nargs="+", metavar="GATE", help="a gate URI (several allowed)")
    serve.add_argument(
        "--space",
        action="append",
        default=[],
        metavar="NAME=KIND",
        help=f"a space to serve; KIND is one of {KINDS} (repeat for several)",
    )
    add_verbosity(serve)
    serve.set_defaults(func=lambda a: run_guarded(_serve, a))


def _space_arg(text: str) -> tuple[str, Kind]:
    name, sep, kind = text.partition("=")
    if not sep or not name:
        raise UsageError(f"--space {text!r}: expected NAME=KIND (KIND one of {KINDS})")
    try:
        return name, Kind(kind.lower())
    except ValueError:
        raise UsageError(f"--space {text!r}: unknown kind {kind!r} (one of {KINDS})") from None


def _serve(args: argparse.Namespace) -> int:
    setup_logging(args)
    if not args.space:
        raise UsageError("give at least one --space NAME=KIND")
    spaces = [_space_arg(text) for text in args.space]
    if len({name for name, _ in spaces}) != len(spaces):
        raise UsageError("each --space needs its own name")
    for uri in args.gates:
        try:
            if parse_uri(uri).space:
                raise UsageError(f"{uri}: a gate URI names no space (tcp://HOST:PORT/?keep)")
        except UriError as exc:
            raise UsageError(str(exc)) from None

    async def main() -> None:
        async with SpaceRepository() as repo:
            for name, kind in spaces:
                repo.add(name, Space(kind))
            listing = " ".join(f"{name}({kind.value})" for name, kind in spaces)
            for uri in args.gates:
                gate = await repo.add_gate(uri)
                print(f"gate {gate.uri} spaces {listing}", flush=True)
            await trio.sleep_forever()

    return run_trio(main)
