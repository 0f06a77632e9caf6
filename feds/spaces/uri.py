"""Gate and space URIs: ``tcp://host[:port][/space][?mode]`` (sans-IO parsing).

The port defaults to 31415 and the mode to KEEP. Every spelling the pSpaces implementations use
is accepted: ``?keep``, ``?KEEP``, ``?mode=keep`` (any case). PUSH and PULL are named by the
guideline but implemented by no pSpaces library; they are refused with :class:`UriError`.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from urllib.parse import parse_qsl, urlsplit

DEFAULT_PORT = 31415


class UriError(ValueError):
    """A gate or space URI that cannot be used."""


class Mode(Enum):
    KEEP = "keep"
    CONN = "conn"


_UNSUPPORTED = ("push", "pull")


@dataclass(frozen=True, slots=True)
class SpaceUri:
    host: str
    port: int
    space: str
    mode: Mode

    def gate(self) -> str:
        return f"tcp://{self.host}:{self.port}/?{self.mode.value}"

    def __str__(self) -> str:
        return f"tcp://{self.host}:{self.port}/{self.space}?{self.mode.value}"


def _mode(query: str, uri: str) -> Mode:
    if not query:
        return Mode.KEEP
    names = []
    for key, value in parse_qsl(query, keep_blank_values=True):
        if key.lower() == "mode":
            names.append(value.lower())
        elif value == "":
            names.append(key.lower())
        else:
            raise UriError(
                f"{uri}: unknown query parameter {key!r} (expected keep, conn or mode=...)"
            )
    if len(names) != 1:
        raise UriError(f"{uri}: give one mode (keep or conn), got {query!r}")
    name = names[0]
    if name in _UNSUPPORTED:
        raise UriError(
            f"{uri}: mode {name.upper()} is not supported (no pSpaces library implements it);"
            " use keep or conn"
        )
    try:
        return Mode(name)
    except ValueError:
        raise UriError(f"{uri}: unknown mode {name!r} (expected keep or conn)") from None


def parse_uri(uri: str) -> SpaceUri:
    """Parse a gate URI (``space`` is ``""``) or a space URI; the scheme may be left out."""
    text = uri if "://" in uri else f"tcp://{uri}"
    parts = urlsplit(text)
    if parts.scheme.lower() != "tcp":
        raise UriError(f"{uri}: only tcp:// is supported, not {parts.scheme}://")
    if not parts.hostname:
        raise UriError(f"{uri}: no host")
    try:
        port = parts.port if parts.port is not None else DEFAULT_PORT
    except ValueError:
        raise UriError(f"{uri}: bad port") from None
    space = parts.path.strip("/")
    if "/" in space:
        raise UriError(f"{uri}: a space name has no '/'")
    return SpaceUri(parts.hostname, port, space, _mode(parts.query, uri))
