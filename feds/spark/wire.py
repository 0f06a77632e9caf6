"""The staging protocol between Spark tasks and the driver's leaf (requests; sans-IO parts).

Tasks run in Python workers that Spark forks; they reach the leaf over TCP with plain blocking
sockets (no trio in a worker). Each frame is a 4-byte length and one feds value
(:mod:`feds.codec`); every request is a record:

==========================================================  ===================================
request                                                     reply
==========================================================  ===================================
``<stage job batch partition attempt [[record key order]…]>``  none (rows for one attempt)
``<staged job batch partition attempt count>``              ``<ok count>`` once the leaf holds
                                                            ``count`` rows for the attempt
``<commit name mode job batch [[partition attempt]…] over>``  ``<ok adds removes messages
                                                            replayed>`` once applied
``<abort job batch>``                                       ``<ok dropped>``
==========================================================  ===================================

Any request can be answered ``<error text>`` instead, which the task raises as
:class:`LeafError`. ``batch`` is ``#nil`` for batch jobs.
"""

from __future__ import annotations

import socket
from collections.abc import Iterable

from feds.client import parse_address
from feds.codec import NEED_DATA, FrameDecoder, encode_frame
from feds.values import Record, Symbol, Value

STAGE, STAGED, COMMIT, ABORT = Symbol("stage"), Symbol("staged"), Symbol("commit"), Symbol("abort")
OK, ERROR = Symbol("ok"), Symbol("error")
CHUNK = 2000
"""Rows per ``stage`` frame."""
TIMEOUT = 300.0
"""Seconds a task waits for the leaf's answer (a commit of many rows takes a while)."""


class LeafError(RuntimeError):
    """The leaf refused a request, or cannot be reached."""


class LeafConnection:
    """A blocking connection from a Spark worker to the leaf's staging listener."""

    def __init__(self, address: str, timeout: float = TIMEOUT) -> None:
        host, port = parse_address(address)
        try:
            self.sock = socket.create_connection((host, port), timeout=timeout)
        except OSError as exc:
            raise LeafError(f"cannot reach the feds leaf at {address}: {exc}") from None
        self.address = address
        self.frames = FrameDecoder()

    def send(self, request: Value) -> None:
        self.sock.sendall(encode_frame(request))

    def ask(self, request: Value) -> tuple:
        """Send ``request`` and return the fields of the ``<ok …>`` answer."""
        self.send(request)
        while True:
            reply = self.frames.next_value()
            if reply is not NEED_DATA:
                break
            data = self.sock.recv(65536)
            if not data:
                raise LeafError(f"the feds leaf at {self.address} closed the connection")
            self.frames.feed(data)
        if reply.label == ERROR:
            raise LeafError(str(reply.fields[0]))
        return reply.fields

    def stage(self, attempt: tuple, entries: Iterable[tuple]) -> int:
        """Stage every entry for ``attempt``; returns how many once the leaf holds them all."""
        chunk: list[tuple] = []
        count = 0
        for entry in entries:
            chunk.append(entry)
            if len(chunk) == CHUNK:
                self.send(Record(STAGE, (*attempt, tuple(chunk))))
                count += len(chunk)
                chunk = []
        if chunk:
            self.send(Record(STAGE, (*attempt, tuple(chunk))))
            count += len(chunk)
        (held,) = self.ask(Record(STAGED, (*attempt, count)))
        if held != count:
            raise LeafError(f"the leaf holds {held} rows of attempt {attempt}, not {count}")
        return count

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> LeafConnection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
