"""``feds spaces``: serve a pSpaces repository behind gates, or use a remote space."""

from __future__ import annotations

import argparse
import sys

import trio

from feds.cli.common import (
    EXIT_FAILED,
    EXIT_OK,
    UsageError,
    add_verbosity,
    run_guarded,
    run_trio,
    setup_logging,
)
from feds.spaces import Kind, RemoteSpace, Space, SpaceError, SpaceRepository, UriError
from feds.spaces.fieldtext import format_tuple, parse_field
from feds.spaces.jtypes import SpaceTypeError
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

    for op, text in OPERATIONS.items():
        cmd = commands.add_parser(
            op,
            help=text,
            description=f"{text[0].upper()}{text[1:]} at the remote space SPACE_URI "
            "(tcp://HOST:PORT/NAME?keep|conn). Fields: 42 (int), 7L (long), 3.5 (double), "
            "2.5f (float), true/false, 'c' (char), \"text\" or text (string); in templates also "
            "?int ?long ?double ?float ?boolean ?char ?byte ?string ?tuple ?any ?number (formal "
            "fields). Prints each tuple found on a line, in the same syntax. Exit code 1 if "
            "nothing is found (getp, queryp), on a timeout or a refused request.",
            epilog=f"example: feds spaces {op} 'tcp://127.0.0.1:31415/seq?keep' "
            + ('"job" 1' if op == "put" else '"job" ?int'),
        )
        cmd.add_argument("uri", metavar="SPACE_URI", help="the space, tcp://HOST:PORT/NAME?keep")
        cmd.add_argument("fields", nargs="*", metavar="FIELD", help="the tuple or template")
        if op in ("get", "query"):
            cmd.add_argument("--timeout", type=float, help="give up after this many seconds")
        cmd.set_defaults(func=lambda a: run_guarded(_call, a), op=op)


OPERATIONS = {
    "put": "put a tuple",
    "get": "take a matching tuple, waiting for one",
    "getp": "take a matching tuple if there is one",
    "getall": "take every matching tuple",
    "query": "read a matching tuple, waiting for one",
    "queryp": "read a matching tuple if there is one",
    "queryall": "read every matching tuple",
}
_METHODS = {"getall": "get_all", "queryall": "query_all"}


def _call(args: argparse.Namespace) -> int:
    try:
        fields = [parse_field(text) for text in args.fields]
        space = RemoteSpace(args.uri)
    except (SpaceTypeError, UriError, SpaceError) as exc:
        raise UsageError(str(exc)) from None
    kwargs = {"timeout": args.timeout} if args.op in ("get", "query") else {}

    async def main() -> int:
        async with space:
            try:
                result = await getattr(space, _METHODS.get(args.op, args.op))(*fields, **kwargs)
            except (SpaceError, SpaceTypeError) as exc:
                print(f"feds: {exc}", file=sys.stderr)
                return EXIT_FAILED
        found = [] if result is None or result is True else result
        for t in [found] if isinstance(found, tuple) else found:
            print(format_tuple(t))
        return EXIT_FAILED if result is None else EXIT_OK

    return run_trio(main)


def _space_arg(text: str) -> tuple[str, Kind]:
    name, sep, kind = text.partition("=")
    if not sep or not name:
        raise UsageError(f"--space {text!r}: expected NAME=KIND (KIND one of {KINDS})")
    try:
        return name, Kind(kind.lower())
    except ValueError:
        raise UsageError(f"--space {text!r}: unknown kind {kind!r} (one of {KINDS})") from None


def _check_gates(uris: list[str]) -> None:
    for uri in uris:
        try:
            if parse_uri(uri).space:
                raise UsageError(f"{uri}: a gate URI names no space (tcp://HOST:PORT/?keep)")
        except UriError as exc:
            raise UsageError(str(exc)) from None


def _serve(args: argparse.Namespace) -> int:
    setup_logging(args)
    if not args.space:
        raise UsageError("give at least one --space NAME=KIND")
    spaces = [_space_arg(text) for text in args.space]
    if len({name for name, _ in spaces}) != len(spaces):
        raise UsageError("each --space needs its own name")
    _check_gates(args.gates)

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
