"""Client commands: ``feds assert``, ``send``, ``watch``, ``query`` and ``status``.

Values and patterns are written in the text syntax (``<temp "kitchen" 21>``, ``<temp $room _>``).
Exit codes: 0 done, 1 failed (cannot connect, timed out, too few events), 2 bad usage.
"""

from __future__ import annotations

import argparse
import inspect
import json
import math
import ssl
import sys

import trio

from feds import client
from feds.auth import AuthError, Secrets
from feds.cli.common import (
    EXIT_FAILED,
    EXIT_OK,
    UsageError,
    add_verbosity,
    pattern_arg,
    run_guarded,
    run_trio,
    setup_logging,
    value_arg,
)
from feds.runtime import figures
from feds.syntax import format_value, to_json
from feds.tls import client_context

RECONNECT_HELP = (
    "if the connection to the node is lost, re-dial (forever, with backoff) and assert and "
    "observe again, instead of exiting 1"
)
TIMEOUT_HELP = "give up after this many seconds without an answer (default %(default)s)"


def register(sub: argparse._SubParsersAction) -> None:
    p = _subcommand(sub, _assert, "feds assert 127.0.0.1:7401 '<present \"Alice\">' --for 30")
    p.add_argument("values", metavar="VALUE", nargs="+", help="values in the text syntax")
    p.add_argument("--for", dest="seconds", type=float, help="hold for this many seconds")
    p.add_argument("--reconnect", action="store_true", help=RECONNECT_HELP)
    _common(p, _assert)

    p = _subcommand(sub, _send, 'feds send 127.0.0.1:7401 \'<speak "Alice" "hello">\'')
    p.add_argument("value", metavar="VALUE", help="a value in the text syntax")
    _common(p, _send)

    p = _subcommand(
        sub,
        _watch,
        "feds watch 127.0.0.1:7402 '<temp $room $v>'",
        "feds watch 127.0.0.1:7402 '<speak $who $text:string>' --json --count 3",
    )
    p.add_argument("pattern", metavar="PATTERN", help="a pattern in the text syntax")
    p.add_argument("--json", action="store_true", help="print JSON lines instead")
    p.add_argument("--count", type=int, help="exit (0) after this many events")
    p.add_argument(
        "--reconnect",
        action="store_true",
        help=RECONNECT_HELP + " (across the gap: '-' for each match when it goes, '+' for each "
        "match once back; messages sent meanwhile are missed)",
    )
    p.add_argument(
        "--timeout", type=float, help="stop after this many seconds (exit 1 if --count not met)"
    )
    _common(p, _watch, timeout=False)

    p = _subcommand(sub, _query, "feds query 127.0.0.1:7400 '<present $who>'")
    p.add_argument("pattern", metavar="PATTERN", help="a pattern in the text syntax")
    p.add_argument("--json", action="store_true", help="print JSON lines instead")
    _common(p, _query)

    p = _subcommand(sub, _status)
    p.add_argument("--json", action="store_true", help="print JSON")
    _common(p, _status)


def _subcommand(
    sub: argparse._SubParsersAction, handler, *examples: str
) -> argparse.ArgumentParser:
    """The parser of the command ``handler`` runs (``_send``: ``feds send``), with the node's
    address as its first argument. The handler's docstring gives the one-line summary (its
    first line) and the description (the rest); the examples are the epilog."""
    summary, _, description = inspect.getdoc(handler).partition("\n\n")
    several = len(examples) > 1  # one per line, so the epilog must not be re-wrapped
    epilog = ("examples:\n  " if several else "example: ") + "\n  ".join(examples)
    p = sub.add_parser(
        handler.__name__.lstrip("_"),
        help=summary,
        description=" ".join(description.split()),
        epilog=epilog if examples else None,
        formatter_class=argparse.RawDescriptionHelpFormatter if several else argparse.HelpFormatter,
    )
    p.add_argument("address", metavar="ADDR", help="HOST:PORT of a node")
    return p


def _common(p: argparse.ArgumentParser, func, timeout: bool = True) -> None:
    if timeout:
        p.add_argument("--timeout", type=float, default=client.DEFAULT_TIMEOUT, help=TIMEOUT_HELP)
    p.add_argument("--name", default="feds-cli", help="client name shown in the node's status")
    p.add_argument(
        "--secret-file",
        metavar="PATH",
        help="the deployment's secret file (TOML, 'client = \"...\"' or for status "
        "'admin = \"...\"'): needed when the node requires authentication",
    )
    p.add_argument("--tls-ca", metavar="PATH", help="connect with TLS, trusting this CA")
    p.add_argument("--tls-cert", metavar="PATH", help="client certificate (mutual TLS)")
    p.add_argument("--tls-key", metavar="PATH", help="its private key")
    add_verbosity(p)
    p.set_defaults(func=lambda a: run_guarded(func, a))


def _secrets(args: argparse.Namespace) -> Secrets | None:
    if args.secret_file is None:
        return None
    try:
        return Secrets.load(args.secret_file)
    except AuthError as exc:
        raise UsageError(str(exc)) from None


def _tls(args: argparse.Namespace) -> ssl.SSLContext | None:
    if args.tls_ca is None:
        if args.tls_cert or args.tls_key:
            raise UsageError("--tls-cert and --tls-key need --tls-ca")
        return None
    try:
        return client_context(args.tls_ca, args.tls_cert, args.tls_key)
    except (OSError, ssl.SSLError) as exc:
        raise UsageError(f"cannot use the TLS files: {exc}") from None


def _connecting(args: argparse.Namespace, timeout: float | None = None) -> dict:
    """The keyword arguments of ``client.connect`` that the common options give."""
    return {
        "name": args.name,
        "timeout": args.timeout if timeout is None else timeout,
        "secrets": _secrets(args),
        "reconnect": getattr(args, "reconnect", False),
        "tls": _tls(args),
    }


def _run(args: argparse.Namespace, main) -> int:
    setup_logging(args)
    return run_trio(main)


def _assert(args: argparse.Namespace) -> int:
    """assert values until Ctrl-C (or --for SECONDS)

    Assert each VALUE at the node at ADDR and hold the assertions until Ctrl-C or --for
    SECONDS; they are retracted when the command ends.
    """
    values = [value_arg(v) for v in args.values]

    async def main() -> int:
        async with client.connect(args.address, **_connecting(args)) as ds:
            for v in values:
                ds.assert_(v)
            await ds.sync(args.timeout)
            hold = f"for {args.seconds:g} s" if args.seconds is not None else "until Ctrl-C"
            print(f"asserted {len(values)} value(s); holding {hold}", file=sys.stderr, flush=True)
            with trio.move_on_after(math.inf if args.seconds is None else args.seconds):
                if args.reconnect:
                    await trio.sleep_forever()
                await ds.wait_lost()  # the assertions are gone with the node: say so, exit 1
        return EXIT_OK

    return _run(args, main)


def _send(args: argparse.Namespace) -> int:
    """send a message

    Send VALUE as a message to every matching observer in the overlay, and wait until it has
    reached every node.
    """
    value = value_arg(args.value)

    async def main() -> int:
        async with client.connect(args.address, **_connecting(args)) as ds:
            ds.send(value)
            await ds.sync(args.timeout)
        return EXIT_OK

    return _run(args, main)


def _line(event: client.Event, as_json: bool, with_kind: bool = True) -> str:
    """One output line: ``+ [captures]`` (or just ``[captures]``), or a JSON object."""
    if as_json:
        record = {
            "captures": [to_json(c) for c in event.captures],
            "bindings": {k: to_json(v) for k, v in event.bindings().items()},
        }
        return json.dumps({"event": event.kind, **record} if with_kind else record)
    text = format_value(tuple(event.captures))
    return f"{event.kind} {text}" if with_kind else text


def _watch(args: argparse.Namespace) -> int:
    """print events matching a pattern as they happen

    Observe PATTERN at the node at ADDR and print one line per event: '+ [captures]' when a
    match appears, '- [captures]' when it goes, '! [captures]' for a message. Lines are flushed
    as they happen, so the output can be piped.
    """
    pattern = pattern_arg(args.pattern)
    if args.count is not None and args.count < 1:
        raise UsageError("--count must be at least 1")

    async def main() -> int:
        seen = 0
        connect_timeout = client.DEFAULT_TIMEOUT if args.timeout is None else args.timeout
        with trio.move_on_after(math.inf if args.timeout is None else args.timeout):
            async with (
                client.connect(args.address, **_connecting(args, connect_timeout)) as ds,
                ds.observe(pattern[0]) as events,
            ):
                async for event in events:
                    event = client.Event(event.kind, event.captures, pattern[1])
                    print(_line(event, args.json), flush=True)
                    seen += 1
                    if args.count is not None and seen >= args.count:
                        return EXIT_OK
        if args.count is not None:
            print(
                f"feds: timed out after {args.timeout} s with {seen} of {args.count} events",
                file=sys.stderr,
            )
            return EXIT_FAILED
        return EXIT_OK

    return _run(args, main)


def _query(args: argparse.Namespace) -> int:
    """print every current match of a pattern, then exit

    Print every match of PATTERN among the assertions made anywhere in the overlay before the
    query began (a federated sync makes sure every node answered).
    """
    pattern = pattern_arg(args.pattern)

    async def main() -> int:
        async with client.connect(args.address, **_connecting(args)) as ds:
            matches = await ds.query(pattern[0], args.timeout)
        for captures in matches:
            print(_line(client.Event("+", captures, pattern[1]), args.json, False), flush=True)
        return EXIT_OK

    return _run(args, main)


def _status(args: argparse.Namespace) -> int:
    """print a node's figures

    Print the figures of the node at ADDR: assertions in its fragment, handlers in its index,
    neighbours, and per connection packets, events and bytes.
    """

    async def main() -> int:
        answer = await client.status(args.address, args.timeout, _secrets(args), _tls(args))
        data = figures(answer)
        if args.json:
            print(json.dumps(data, indent=2, default=str))
            return EXIT_OK
        for key, value in data.items():
            if key != "links":
                print(f"{key}: {value}")
        print("links:")
        for link in data["links"]:
            stats = ", ".join(f"{k} {v}" for k, v in link.items() if k not in ("peer", "role"))
            print(f"  {link['role']} {link['peer']}: {stats}")
        return EXIT_OK

    return _run(args, main)
