"""Tuple spaces in feds: the pSpaces API and wire protocol, Tupelo templates, the space calculus.

* :mod:`feds.spaces.space` — local spaces (sequential, queue, stack, pile, random) with
  put/get/getp/getAll/query/queryp/queryAll; typed fields (:mod:`~feds.spaces.jtypes`) and
  templates (:mod:`~feds.spaces.templates`).
* :mod:`feds.spaces.gate` — ``SpaceRepository`` and TCP gates speaking jSpace's JSON protocol
  (:mod:`~feds.spaces.wire`); :mod:`feds.spaces.remote` — ``RemoteSpace``.

``docs/tuplespaces.md`` has examples and says what is built and what is not.
"""

from feds.spaces.blocking import BlockingSpace
from feds.spaces.gate import Gate, SpaceRepository
from feds.spaces.jtypes import Byte, Char, Float, JavaObject, Long, SpaceTypeError
from feds.spaces.remote import RemoteSpace
from feds.spaces.space import (
    PileSpace,
    QueueSpace,
    RandomSpace,
    SequentialSpace,
    Space,
    SpaceError,
    SpaceTimeout,
    StackSpace,
)
from feds.spaces.store import Kind
from feds.spaces.templates import ANY, NUMBER_FIELD, Formal
from feds.spaces.uri import UriError

__all__ = [
    "ANY",
    "NUMBER_FIELD",
    "BlockingSpace",
    "Byte",
    "Char",
    "Float",
    "Formal",
    "Gate",
    "JavaObject",
    "Kind",
    "Long",
    "PileSpace",
    "QueueSpace",
    "RandomSpace",
    "RemoteSpace",
    "SequentialSpace",
    "Space",
    "SpaceError",
    "SpaceRepository",
    "SpaceTimeout",
    "SpaceTypeError",
    "StackSpace",
    "UriError",
]
