"""Helpers shared by the CLI commands: logging set-up, errors, value and pattern arguments."""

from __future__ import annotations

import argparse
import logging
import signal
import sys

import trio

from feds.client import FedsError
from feds.patterns import PatternError, validate
from feds.runtime import InsecureListen, NodeFailed
from feds.syntax import ParseError, parse, parse_pattern
from feds.values import Value

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


class UsageError(Exception):
    """Bad command-line input: printed, exit code 2."""


def add_verbosity(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "-v", "--verbose", action="count", default=0, help="log more to stderr (-vv: debug)"
    )


def setup_logging(args: argparse.Namespace) -> None:
    level = [logging.WARNING, logging.INFO, logging.DEBUG][min(getattr(args, "verbose", 0), 2)]
    logging.basicConfig(
        level=level, stream=sys.stderr, format="%(asctime)s %(name)s %(levelname)s %(message)s"
    )


def value_arg(text: str) -> Value:
    """A value from the command line, in the text syntax."""
    try:
        return parse(text)
    except ParseError as exc:
        raise UsageError(f"invalid value {text!r}: {exc}") from None


def pattern_arg(text: str) -> tuple[Value, tuple[str, ...]]:
    """A pattern from the command line, in the text syntax."""
    try:
        pattern = parse_pattern(text)
        validate(pattern[0])  # a node would refuse it: say why here
        return pattern
    except (ParseError, PatternError) as exc:
        raise UsageError(f"invalid pattern {text!r}: {exc}") from None


def _only(exc: BaseException, kind: type[BaseException] | tuple[type[BaseException], ...]) -> bool:
    """True if ``exc`` is a ``kind``, or a (nested) exception group of nothing else."""
    if isinstance(exc, BaseExceptionGroup):
        return all(_only(e, kind) for e in exc.exceptions)
    return isinstance(exc, kind)


def _leaf(exc: BaseException) -> BaseException:
    """The first exception that is not a group, inside ``exc``."""
    while isinstance(exc, BaseExceptionGroup):
        exc = exc.exceptions[0]
    return exc


async def _stopped_by_sigterm(main) -> object:
    """Run ``main``; SIGTERM (a process supervisor's, ``docker stop``'s, ``kill``'s) stops it as
    Ctrl-C does. Without this, a ``feds node`` that is a container's first process would ignore
    SIGTERM (the kernel's default action does not apply to it) until the supervisor killed it."""
    result: list[object] = []
    async with trio.open_nursery() as nursery:

        async def run_main() -> None:
            result.append(await main())
            nursery.cancel_scope.cancel()

        nursery.start_soon(run_main)
        with trio.open_signal_receiver(signal.SIGTERM) as signals:
            async for _ in signals:
                raise KeyboardInterrupt
    return result[0] if result else None


def run_trio(main) -> int:
    """Run ``main`` under trio; Ctrl-C or SIGTERM is a clean stop (exit 0), a network error
    exit 1."""
    try:
        result = trio.run(_stopped_by_sigterm, main)
    except BaseException as exc:
        if _only(exc, KeyboardInterrupt):
            print("stopped", file=sys.stderr)
            return EXIT_OK
        if _only(exc, (OSError, NodeFailed, InsecureListen)):
            print(f"feds: {_leaf(exc)}", file=sys.stderr)
            return EXIT_FAILED
        raise
    return EXIT_OK if result is None else result


def run_guarded(func, args: argparse.Namespace) -> int:
    """Run a command, turning expected failures into a message and an exit code."""
    try:
        return func(args)
    except UsageError as exc:
        print(f"feds: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except FedsError as exc:
        print(f"feds: {exc}", file=sys.stderr)
        return EXIT_FAILED
