"""The relay: one end of a connection that carries actor events between two processes (sans-IO).

A :class:`Relay` turns bytes from a transport into events for local actors, and events that local
actors send to its *proxies* into bytes for the transport. It never touches a socket: feed it with
:meth:`Relay.receive`, drain it with :meth:`Relay.data_to_send`. The same class serves TCP links,
in-process links and the simulator. The wire format is specified in ``protocols/wire.md``.

Each end names the objects it exposes by *oid* (object id). A **membrane** keeps two tables:

* *exports*: local :class:`~feds.actor.Ref` s the far side may address (oid 0 is the initial
  object given to the constructor);
* *imports*: proxies for the far side's exports. A proxy is a real ``Ref`` whose entity forwards
  every event over this connection.

An entry counts the live assertions crossing the connection (in either direction) that mention
it; a message or a pending sync holds it transiently. At zero it is freed at the end of the turn.
Both ends count the same assertions, so they free the same oids once the link is quiet. oids are
never reused, so a late event for a freed oid is recognised and dropped, not confused with a new
object; an oid that was never allocated is a protocol error.

Events are buffered as the relay actor's turns run and written as one ``<turn ...>`` packet
when the transport takes the bytes (:meth:`Relay.data_to_send`): the turns a run of the
scheduler made for the far side cross as one packet, applied there as it arrives
(:meth:`Relay._apply_now`; in a turn of the relay actor if it holds a sync or an earlier turn of
that actor waits), so that a burst costs one packet and one decode call per hop rather than one
per event. Turns are joined only where that changes nothing the far side can see: it applies a
packet's retractions after the rest, so a turn that asserts, sends or syncs after a turn with
retractions starts a new packet; retractions after retractions, and anything after a turn
without any, keep their order in one packet (see :meth:`Relay._emit`).

From protocol version 2, each direction of a connection has a value cache (:mod:`feds.codec`):
a record the node interned, such as a subscription pattern, crosses in full once, then as a
slot number. An event that cannot be sent takes its cache definitions with it (the encoder
forgets them), so the two ends' tables always match. From version 4, an event is a bare array
(``[oid value]`` for a message, ...) rather than ``[oid <message value>]``: no event record is
made on either side.

Anything wrong with the input closes this connection only, with a specific reason (sent to the
far side as an ``<error ...>`` packet): everything the far side asserted here is retracted when
the relay actor stops, and its proxies go dead.
"""

from __future__ import annotations

import logging
import weakref
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass
from itertools import chain, islice, repeat
from operator import attrgetter, itemgetter
from types import MappingProxyType
from typing import Final

import msgpack

from feds import actor as actors
from feds.actor import Actor, Entity, Handle, Ref, Scheduler, Turn
from feds.auth import NONCE_SIZE, Secrets, new_nonce, proof, proofs_match
from feds.codec import (
    DEFAULT_LIMITS,
    NEED_DATA,
    CodecError,
    Encoder,
    FrameDecoder,
    Limits,
    decode,
    encode,
    encode_frame,
    record_head,
    record_prefix,
)
from feds.limits import DEFAULT_NET_LIMITS, HandleBudget
from feds.routes import follow
from feds.values import Embedded, FrozenDict, Record, Symbol, Value, from_python

__all__ = [
    "BARE_EVENTS_VERSION",
    "CLIENT",
    "PEER",
    "PROTOCOL_VERSION",
    "SUPPORTED_VERSIONS",
    "VALUE_CACHE_SLOTS",
    "Hello",
    "ProtocolError",
    "Relay",
    "RelayStats",
    "exchange",
    "negotiate_version",
]

log = logging.getLogger("feds.relay")

PROTOCOL_VERSION: Final = 4
"""The highest wire protocol version this code speaks (sent in our hello)."""
SUPPORTED_VERSIONS: Final = frozenset({1, 2, 3, 4})
"""Every version this code speaks; a contiguous range ending at :data:`PROTOCOL_VERSION`."""
VALUE_CACHE_SLOTS: Final = 1024
"""Slots of the value cache of each direction of a connection (from version 2 on)."""

HELLO: Final = Symbol("hello")
TURN: Final = Symbol("turn")
ERROR: Final = Symbol("error")
ASSERT: Final = Symbol("assert")
RETRACT: Final = Symbol("retract")
MESSAGE: Final = Symbol("message")
SYNC: Final = Symbol("sync")
AUTH: Final = Symbol("auth")
PING: Final = Symbol("ping")
PONG: Final = Symbol("pong")
KEEPALIVE_VERSION: Final = 3
"""The first protocol version with ``<ping>`` and ``<pong>``."""
BARE_EVENTS_VERSION: Final = 4
"""The first protocol version whose events are bare arrays, not records
(:meth:`Relay._check_bare_event`)."""
_ASSERT_NAME: Final = ASSERT.name  # events are told apart by name: a str compares fastest
_RETRACT_NAME: Final = RETRACT.name
_MESSAGE_NAME: Final = MESSAGE.name
_SYNC_NAME: Final = SYNC.name
_ASSERT_HEAD: Final = record_head(ASSERT)  # what _emit sends instead of making event records
_RETRACT_HEAD: Final = record_head(RETRACT)
_MESSAGE_HEAD: Final = record_head(MESSAGE)
_SYNC_HEAD: Final = record_head(SYNC)
PEER: Final = "peer"
CLIENT: Final = "client"
ADMIN: Final = "admin"
ROLES: Final = frozenset({PEER, CLIENT, ADMIN})

MINE: Final = 0
"""Wire tag of an embedded reference to an object the *sender* exports."""
YOURS: Final = 1
"""Wire tag of an embedded reference to an object the *receiver* exported earlier."""

DEFAULT_MAX_HANDLES: Final[Mapping[str, int]] = MappingProxyType(
    DEFAULT_NET_LIMITS.handles_by_role()
)
"""Default bound on the far side's live assertions per connection, by the role in its hello
(``NetLimits.max_client_handles``, ``max_admin_handles``, ``max_peer_handles``).

A client or admin tool holds only its own assertions; a node link (``peer``) carries what a
whole subtree asserts (copy-up sends everything towards the root), so its bound is far higher.
"""

_MAX_ID: Final = 2**63
_ATOMS: Final = frozenset({type(None), bool, int, float, str, bytes, Symbol})
_TURN_OVERHEAD: Final = 32  # bytes around the events of a turn packet (label, array headers)
TURN_PACKET_EVENTS: Final = 1024
"""Most events one ``<turn>`` packet carries: a bigger turn is split over consecutive packets, so
that the far side decodes and applies it in parts of bounded time (and keeps serving its other
links meanwhile) instead of in one step of seconds."""


def _turn_prefix() -> bytes:
    """The bytes of ``<turn [...]>`` before its events' array header, taken from the codec.

    Events are encoded one by one as they happen (so each is checked and its references counted
    on its own) and spliced into the packet at commit. The events array is the last item of the
    packet, so an empty turn's encoding ends with the empty array header ``0x90``. The splice is
    checked against the codec once, here.
    """
    empty = encode(Record(TURN, ((),)))
    if not empty.endswith(b"\x90"):
        raise RuntimeError("feds.codec no longer ends a turn packet with its events array")
    prefix = empty[:-1]
    sample = (Record(ASSERT, (Symbol("x"), 1)), (2, frozenset({3})))
    spliced = prefix + b"\x92" + b"".join(encode(e) for e in sample)
    if decode(spliced) != Record(TURN, (sample,)):
        raise RuntimeError("feds.codec encodes turn packets in a way the relay cannot splice")
    return prefix


_TURN_PREFIX: Final = _turn_prefix()
_LONE_MESSAGE: Final = _TURN_PREFIX + b"\x91\x92"
"""How a packet of one bare event of two items (a message) begins: ``<turn [[oid value]]>``."""
_MESSAGE_DEPTH: Final = 3
"""How deep a message's value is in its packet: the packet's array, the events', the event's."""
_EVENT_HEAD_MAX: Final = 10
"""Most bytes of a bare message before its value: its array's header and an oid."""
_PING_FRAME: Final = encode_frame(Record(PING, ()))
_PONG_FRAME: Final = encode_frame(Record(PONG, ()))
_ERROR_ENCODER: Final = Encoder()


class ProtocolError(Exception):
    """The far side broke the protocol; ``reason`` says how (it is sent in the error packet)."""

    def __init__(self, reason: str, detail: Value = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.detail = detail


def _check_turn_length(frame: bytes) -> None:
    """Refuse a ``<turn>`` packet of more than :data:`TURN_PACKET_EVENTS` events before it is
    decoded: decoding and applying a million events would keep the node from its other links
    for many seconds."""
    if not frame.startswith(_TURN_PREFIX):
        return
    at = len(_TURN_PREFIX)
    head = frame[at] if len(frame) > at else 0
    if head == 0xDC:
        count = int.from_bytes(frame[at + 1 : at + 3], "big")
    elif head == 0xDD:
        count = int.from_bytes(frame[at + 1 : at + 5], "big")
    else:
        return  # a fixarray (at most 15 events) or a malformed packet, which decoding reports
    _check_turn_count(count)


def _check_turn_count(count: int) -> None:
    if count > TURN_PACKET_EVENTS:
        raise ProtocolError(
            f"turn of {count} events: at most {TURN_PACKET_EVENTS} per packet "
            "(split a bigger turn over several packets)"
        )


def negotiate_version(theirs: int) -> int | None:
    """The version to speak with a peer that announced ``theirs``, or None if there is none.

    Both ends compute ``min(their highest, our highest)`` and check that they speak it.
    """
    agreed = min(theirs, PROTOCOL_VERSION)
    return agreed if agreed in SUPPORTED_VERSIONS else None


@dataclass(frozen=True, slots=True)
class Hello:
    """The first packet of each side: ``<hello version role name auth>``."""

    version: int
    role: str
    name: str
    auth: FrozenDict

    def to_value(self) -> Record:
        return Record(HELLO, (self.version, Symbol(self.role), self.name, self.auth))

    @classmethod
    def from_value(cls, packet: Record) -> Hello:
        """Parse a hello packet; raises :class:`ProtocolError` naming what is wrong."""
        if len(packet.fields) != 4:
            raise ProtocolError("malformed hello: expected <hello version role name auth>")
        version, role, name, auth = packet.fields
        if version.__class__ is not int:
            raise ProtocolError("malformed hello: version is not an integer", version)
        if role.__class__ is not Symbol or role.name not in ROLES:
            raise ProtocolError("malformed hello: role is not peer or client", _plain(role))
        if name.__class__ is not str:
            raise ProtocolError("malformed hello: name is not a string", _plain(name))
        if auth.__class__ is not FrozenDict:
            raise ProtocolError("malformed hello: auth is not a dict", _plain(auth))
        return cls(version, role.name, name, auth)


@dataclass(slots=True)
class RelayStats:
    """Traffic counters of one connection end (for ``feds status`` and the simulator)."""

    packets_in: int = 0
    packets_out: int = 0
    events_in: int = 0
    events_out: int = 0
    bytes_in: int = 0
    bytes_out: int = 0
    late_events_in: int = 0  # events for an oid freed here, dropped (a benign race)
    passed_on: int = 0  # of events_in, messages passed on as their bytes (Relay._pass_on)

    def as_dict(self) -> dict[str, int]:
        return asdict(self)


def _plain(v: Value) -> Value:
    """``v`` for an error detail: embedded references cannot be echoed back."""
    return None if isinstance(v, Embedded) else v


# ---------------------------------------------------------------------------------------------
# Entities living in the relay actor


class _Proxy(Entity):
    """Stands for the far side's object ``oid``: forwards every event over the connection."""

    __slots__ = ("oid", "relay")  # Entity has no slots, so proxies can be weakly referenced

    def __init__(self, relay: Relay, oid: int) -> None:
        self.relay = relay
        self.oid = oid

    def on_publish(self, turn: Turn, value: Value, handle: Handle) -> None:
        self.relay._send_assert(turn, self.oid, value, handle)

    def on_retract(self, turn: Turn, handle: Handle) -> None:
        self.relay._send_retract(turn, handle)

    def on_message(self, turn: Turn, value: Value) -> None:
        self.relay._send_message(turn, self.oid, value)

    def on_sync(self, turn: Turn, peer: Ref) -> None:
        self.relay._send_sync(turn, self.oid, peer)

    def __repr__(self) -> str:
        return f"<proxy {self.oid} of {self.relay.name}>"


_PROXY_ONLY: Final = frozenset((_Proxy,))
_MESSAGES_ONLY: Final = frozenset((actors.MESSAGE,))
_entity_class, _oid_of = attrgetter("entity.__class__"), attrgetter("entity.oid")
_entry_ref, _ref_actor = attrgetter("ref"), attrgetter("actor")
_TUPLE_ONLY: Final = frozenset((tuple,))
_INT_ONLY: Final = frozenset((int,))
_ONE, _THREE = frozenset((1,)), frozenset((3,))  # the lengths of a bare retraction, assertion
_first, _second, _third = itemgetter(0), itemgetter(1), itemgetter(2)
"""For :meth:`Relay.take` and :meth:`Relay._message_batches`, which scan a batch or a packet
with them in C: a ref's entity's class, a proxy's oid, an event's payload, a bare message's
value, a membrane entry's ref, a ref's actor."""


class _Inert(Entity):
    """What a reference to a freed oid becomes: drops everything, answers syncs."""

    __slots__ = ()


# ---------------------------------------------------------------------------------------------
# The membrane


class _Entry:
    """One row of a membrane table: an oid, the local Ref behind it and its reference count."""

    __slots__ = ("count", "kind", "oid", "pinned", "ref")

    def __init__(self, kind: int, oid: int, ref: Ref, pinned: bool = False) -> None:
        self.kind = kind  # MINE: we export it; YOURS: the far side exports it (we import)
        self.oid = oid
        self.ref = ref
        self.count = 0
        self.pinned = pinned


class _Membrane:
    """The export and import tables of one connection end, with reference counts.

    It is also the codec's embedded hooks for the relay (:class:`~feds.codec.EmbeddedHooks`):
    on encode it lifts local references into :attr:`lifted`; on decode it maps each ``[kind
    oid]`` straight to its local Ref, counting its entry into :attr:`decoded` (the relay resets
    both), so that a received value holds local Refs as it comes out of the decoder and is
    never walked again to replace them (except an assertion's, to count what it holds).
    """

    def __init__(self, relay: Relay) -> None:
        self.relay = relay
        self.exports: dict[int, _Entry] = {}
        self.export_ids: dict[Ref, _Entry] = {}
        self.imports: dict[int, _Entry] = {}
        self.next_oid = 1  # oid 0 is the initial object, present or not
        self._proxies: weakref.WeakValueDictionary[int, _Proxy] = weakref.WeakValueDictionary()
        self.dirty: list[_Entry] = []
        self.lifted: list[_Entry] = []  # entries counted by the encoding under way
        self.decoded: list[_Entry] = []  # entries counted by the decoding under way
        self.refs_decoded = 0  # references in the packet being decoded, counted or not
        self.forged: int | None = None  # an oid of ours it named that was never allocated
        self.unheld = 0  # references of the packet being applied not yet found by hold()
        self.live = False  # whether references may be mapped (the far side is accepted)
        self.known_ref_free: Callable[[Value], bool]  # the relay's decoder's, set by the relay

    # -- tables -------------------------------------------------------------------------------

    def export(self, ref: Ref, oid: int | None = None, pinned: bool = False) -> _Entry:
        entry = self.export_ids.get(ref)
        if entry is None:
            if oid is None:
                oid = self.next_oid
                self.next_oid += 1
            entry = _Entry(MINE, oid, ref, pinned)
            self.exports[oid] = entry
            self.export_ids[ref] = entry
        return entry

    def import_oid(self, oid: int, pinned: bool = False) -> _Entry:
        entry = self.imports.get(oid)
        if entry is None:
            proxy = self._proxies.get(oid)
            if proxy is None:
                proxy = _Proxy(self.relay, oid)
                self._proxies[oid] = proxy
            entry = _Entry(YOURS, oid, Ref(self.relay.actor.root, proxy), pinned)
            self.imports[oid] = entry
        return entry

    # -- counting -----------------------------------------------------------------------------

    def release(self, entries: Iterable[_Entry]) -> None:
        """Drop one count of each entry; one at zero is freed when the turn ends (:meth:`collect`).

        Takes many entries at once: a packet or a turn releases several, one call for all.
        """
        dirty = self.dirty
        for entry in entries:
            entry.count -= 1
            if entry.count <= 0:
                dirty.append(entry)

    def collect(self) -> None:
        """Free every entry whose count dropped to zero during this turn and stayed there."""
        dirty, self.dirty = self.dirty, []
        for entry in dirty:
            if entry.count > 0 or entry.pinned:
                continue
            if entry.kind == MINE:
                if self.exports.get(entry.oid) is entry:
                    del self.exports[entry.oid]
                    del self.export_ids[entry.ref]
            elif self.imports.get(entry.oid) is entry:
                del self.imports[entry.oid]

    def clear(self) -> None:
        self.exports.clear()
        self.export_ids.clear()
        self.imports.clear()
        self._proxies.clear()
        self.dirty.clear()

    # -- codec hooks --------------------------------------------------------------------------

    def encode_embedded(self, obj: Embedded) -> Value:
        """The wire form of a local reference, counting the entry it uses (in :attr:`lifted`)."""
        if obj.__class__ is not Ref:
            raise CodecError(f"cannot send the reference {obj!r} over a relay")
        entity = obj.entity  # type: ignore[attr-defined]
        if entity.__class__ is _Proxy and entity.relay is self.relay:
            entry = self.import_oid(entity.oid)
        else:
            entry = self.export(obj)  # type: ignore[arg-type]
        entry.count += 1
        self.lifted.append(entry)
        return (entry.kind, entry.oid)

    def decode_embedded(self, v: Value) -> Embedded:
        """The local Ref for a decoded ``[kind oid]``, its entry counted (in :attr:`decoded`).

        Before the far side is accepted nothing is mapped (a reference then is a protocol
        error: :meth:`Relay._dispatch`); an oid of ours that was never allocated is noted in
        :attr:`forged` (refused once the packet is decoded); one freed since is a benign race
        and maps to an inert Ref.
        """
        if not (
            v.__class__ is tuple
            and len(v) == 2
            and v[0].__class__ is int
            and v[1].__class__ is int
            and v[0] in (MINE, YOURS)
            and 0 <= v[1] < _MAX_ID
        ):
            raise CodecError(f"malformed embedded reference {v!r} (expected [0 oid] or [1 oid])")
        self.refs_decoded += 1
        kind, oid = v
        if not self.live:
            return self.relay._inert()
        if kind == MINE:  # the far side's object: a proxy here
            entry = self.import_oid(oid)
        else:
            entry = self.exports.get(oid)
            if entry is None:
                if oid >= self.next_oid and self.forged is None:
                    self.forged = oid
                return self.relay._inert()
        entry.count += 1
        self.decoded.append(entry)
        return entry.ref

    def hold(self, v: Value) -> list[_Entry]:
        """The entries of the references in ``v`` (a value decoded here), each counted once
        more: what an assertion keeps until it is retracted.

        The walk skips a record or dict the decoder knows holds none (interned or cached: a
        pattern) and stops once every reference of the packet being applied has been found
        (:attr:`unheld` counts them down): in ``<pub f pattern captures>`` only ``f`` is
        looked at.
        """
        held: list[_Entry] = []
        if self.unheld:
            self._hold_items((v,), held)
        return held

    def _hold_items(self, items: Iterable[Value], held: list[_Entry]) -> None:
        for x in items:
            if not self.unheld:
                return
            cls = x.__class__
            if cls in _ATOMS:
                continue
            if cls is Ref:
                self.unheld -= 1
                entity = x.entity
                if entity.__class__ is _Proxy and entity.relay is self.relay:
                    entry = self.imports.get(entity.oid)
                else:
                    entry = self.export_ids.get(x)
                if entry is not None:
                    entry.count += 1
                    held.append(entry)
            elif cls is tuple or cls is frozenset:
                self._hold_items(x, held)
            elif cls is Record:
                if not self.known_ref_free(x):
                    if x.label.__class__ is not Symbol:
                        self._hold_items((x.label,), held)
                    self._hold_items(x.fields, held)
            elif cls is FrozenDict and not self.known_ref_free(x):
                self._hold_items(chain.from_iterable(x.items()), held)


# ---------------------------------------------------------------------------------------------
# The relay

ReadyCallback = Callable[[Turn, Hello, Ref], None]
Authenticator = Callable[[Hello], str | None]
_DROPPED: Final = object()  # an assertion we could not deliver or send; its retraction is ignored


class Relay:
    """One end of a connection, living in its own actor on ``scheduler``.

    ``initial`` is exposed to the far side at oid 0; it may also be a function of the far side's
    hello (so a listener can offer each role its own object), called when the hello arrives.
    ``on_ready(turn, hello, remote_initial)`` runs in a turn of the relay actor once the far
    side's hello is accepted; ``remote_initial`` is a proxy for the far side's oid 0 (events
    to it are dropped there if it exposes nothing).
    ``max_handles`` bounds the far side's live assertions here: one number, or a bound per role
    the far side may say it has in its hello (:data:`DEFAULT_MAX_HANDLES`; a role missing from
    the mapping may assert nothing).
    ``authenticate(hello)`` may return a reason to reject the far side. ``on_output()`` is called
    whenever bytes become available from :meth:`data_to_send` (and when the relay closes);
    ``on_close(relay)`` once, when it closes.
    """

    def __init__(
        self,
        scheduler: Scheduler,
        name: str,
        role: str = PEER,
        initial: Ref | Callable[[Hello], Ref | None] | None = None,
        *,
        limits: Limits = DEFAULT_LIMITS,
        max_handles: int | Mapping[str, int] = DEFAULT_MAX_HANDLES,
        budget: HandleBudget | None = None,
        secrets: Secrets | None = None,
        listener: bool = False,
        auth: Mapping[str, Value] | None = None,
        authenticate: Authenticator | None = None,
        on_ready: ReadyCallback | None = None,
        on_close: Callable[[Relay], None] | None = None,
        on_output: Callable[[], None] | None = None,
        on_drop: Callable[[str], None] | None = None,
    ) -> None:
        if role not in ROLES:
            raise ValueError(f"role must be one of {sorted(ROLES)}, not {role!r}")
        self.scheduler = scheduler
        self.name = name
        self.role = role
        self.initial = initial
        self.limits = limits
        self._event_limit = limits.max_frame_size - _TURN_OVERHEAD
        """Bytes the events of one packet may take together (so also one event): the frame
        size less the packet's own label and headers."""
        self.handle_limits = max_handles
        self.max_handles = max_handles if isinstance(max_handles, int) else 0
        """The bound in force: set from ``handle_limits`` by the far side's role at its hello."""
        self.budget = budget
        self.secrets = secrets
        self.listener = listener
        self._nonce = None if secrets is None else new_nonce()
        self._expected_proof: bytes | None = None
        self.on_drop = on_drop
        self.authenticate = authenticate
        self.on_ready = on_ready
        self.on_close = on_close
        self.on_output = on_output
        self.actor = Actor(scheduler, f"relay {name}")
        self.actor.exit_hooks.append(self._actor_exited)
        self.actor.sink = self.take
        credentials = dict(auth or {})
        if self._nonce is not None:
            credentials["nonce"] = self._nonce
        self.hello = Hello(PROTOCOL_VERSION, role, name, from_python(credentials))
        self.remote_hello: Hello | None = None
        self.remote_initial: Ref | None = None
        self.version: int | None = None
        self._bare = False  # whether events are bare arrays (the agreed version is 4 or more)
        self.closed = False
        self.close_reason: str | None = None
        self.stats = RelayStats()

        self._membrane = _Membrane(self)
        # A version 1 peer never uses the value cache, so accepting it costs nothing.
        self._frames = FrameDecoder(
            embedded=self._membrane, limits=limits, cache_slots=VALUE_CACHE_SLOTS
        )
        self._membrane.known_ref_free = self._frames.decoder.known_ref_free
        self._frames.inspect = _check_turn_length
        self._encoder = Encoder(self._membrane, limits)  # with a cache once version 2 is agreed
        self._plain_encoder = Encoder(None, limits)
        self._packer = msgpack.Packer(autoreset=True)
        self._output: list[bytes] = []  # frames to write, joined when taken
        self._far_handles: dict[int, int] = {}  # far handle -> oid (checked when packets arrive)
        # far handle -> (local handle, entries, target) | _DROPPED; the relay actor does not
        # track those handles: the relay withdraws them itself when it closes (_shutdown)
        self._inbound: dict[int, object] = {}
        self._outbound: dict[Handle, object] = {}  # our handle -> (oid, entries) | _DROPPED
        self._sync_pins: dict[int, int] = {}  # exported oid -> syncs awaiting their answer
        self._events: list[bytes] = []  # encoded events of the packet being gathered
        self._removals: list[bytes] = []  # its retractions, sent after the rest
        self._mark = 0  # where the events of the turn emitting now begin in _events
        self._mark_removals = 0  # and in _removals
        self._after_removals = False  # whether _removals holds an earlier turn's retractions
        self._applying = 0  # turns of received events queued and not yet applied
        self._ready_queued = False  # whether the turn calling on_ready is queued
        self._syncs_in = False  # whether the packet being checked holds a sync
        self._goodbye: str | None = None  # the far side's closing reason, once it said it
        self._transient: list[_Entry] = []  # entries held until the current turn commits
        self._flush_turn: Turn | None = None
        self._inert_ref: Ref | None = None

        if isinstance(initial, Ref):
            self._membrane.export(initial, oid=0, pinned=True)
        self._write(self._plain_encoder.encode_frame(self.hello.to_value()))

    def __repr__(self) -> str:
        remote = self.remote_hello.name if self.remote_hello else "?"
        return f"<relay {self.name}<->{remote}{' closed' if self.closed else ''}>"

    # -- the byte interface ---------------------------------------------------------------------

    def receive(self, data: bytes) -> None:
        """Feed bytes from the transport. Never raises: bad input closes this connection."""
        if self.closed or self._goodbye is not None or not data:
            return
        self.stats.bytes_in += len(data)
        try:
            frames = self._frames
            frame = frames.whole(data)
            if frame is not None:  # a read of one frame, the round trip's case: no buffering
                self._take_frame(frame)
                return
            frames.feed(data)
            while not self.closed and self._goodbye is None:
                frame = frames.next_frame()
                if frame is NEED_DATA:
                    break
                self._take_frame(frame)  # type: ignore[arg-type]
        except CodecError as e:
            self._fail(f"bad frame: {e}")
        except ProtocolError as e:
            self._fail(e.reason, e.detail)
        except Exception as e:
            log.exception("%r: internal error on input", self)
            self._fail(f"internal error: {e!r}")

    def _take_frame(self, frame: bytes) -> None:
        """Apply one received frame (a packet), by its bytes if it is a lone message."""
        self.stats.packets_in += 1
        membrane = self._membrane
        membrane.decoded = []
        membrane.refs_decoded = 0
        if frame.startswith(_LONE_MESSAGE) and self._lone_message(frame):
            return
        packet = self._frames.decoder.decode(frame)
        self._dispatch(packet, membrane.decoded, membrane.refs_decoded)

    def data_to_send(self) -> bytes:
        """Take every byte waiting to be written to the transport (with the packet of the
        turns run since the last call)."""
        if self._events or self._removals:
            self._seal()
        data = b"".join(self._output)  # one frame (a round trip's case) is taken as it is
        self._output.clear()
        return data

    @property
    def has_output(self) -> bool:
        return bool(self._output or self._events or self._removals)

    @property
    def partial_input(self) -> int:
        """Bytes received of a frame not yet complete (0 between frames)."""
        return self._frames.buffered

    @property
    def ready(self) -> bool:
        """Whether the far side's handshake is complete (turns may flow both ways)."""
        return self.remote_initial is not None and not self.closed

    @property
    def can_ping(self) -> bool:
        """Whether the far side answers :meth:`ping` (it speaks version 3 or later)."""
        return self.ready and self.version is not None and self.version >= KEEPALIVE_VERSION

    def ping(self) -> None:
        """Send ``<ping>``: the far side answers ``<pong>`` at once, proving it is alive."""
        if self.can_ping:
            self._write(_PING_FRAME)

    def close(self, reason: str = "closed", detail: Value = None) -> None:
        """Close this end: tell the far side why, retract what it asserted here, drop proxies.

        Once the far side has said goodbye, its events still queued are applied first."""
        if not self.closed and self._goodbye is None:
            log.info("%r: closing: %s", self, reason)
            self._shutdown(reason, detail, notify=True)

    # -- introspection (status, tests) -----------------------------------------------------------

    def exported_oids(self) -> set[int]:
        return set(self._membrane.exports)

    def imported_oids(self) -> set[int]:
        return set(self._membrane.imports)

    def live_handles(self) -> tuple[int, int]:
        """(far side's assertions live here, our assertions live there)."""
        return len(self._inbound), len(self._outbound)

    # -- incoming packets --------------------------------------------------------------------------

    def _dispatch(self, packet: Value, entries: list[_Entry], refs: int) -> None:
        if packet.__class__ is not Record:
            raise ProtocolError("unknown packet: not a record", _plain(packet))
        label = packet.label
        if label is TURN and self.remote_hello is not None and self._expected_proof is None:
            self._on_turn(packet, entries, refs)  # nearly every packet (symbols are interned)
            return
        name = _label_name(label)
        if name == ERROR.name:
            self._on_error(packet)
        elif refs and name != TURN.name:
            raise ProtocolError("embedded reference outside a turn packet")
        elif self.remote_hello is None:
            if name != HELLO.name:
                raise ProtocolError(f"packet before hello: {_label_text(label)}")
            self._on_hello(packet)
        elif name == AUTH.name:
            self._on_auth(packet)
        elif self._expected_proof is not None:
            raise ProtocolError(f"packet before authentication: {_label_text(label)}")
        elif name in (PING.name, PONG.name) and self.can_ping and not packet.fields:
            if name == PING.name:
                self._write(_PONG_FRAME)
        elif name == HELLO.name:
            raise ProtocolError("duplicate hello")
        else:
            raise ProtocolError(f"unknown packet {_label_text(label)}")

    def _on_error(self, packet: Record) -> None:
        reason = packet.fields[0] if packet.fields else None
        text = reason if isinstance(reason, str) else repr(reason)
        log.warning("%r: the far side closed the connection: %s", self, text)
        if self._applying:  # its last events are queued: they go first, as they came first
            self._goodbye = f"peer error: {text}"
        else:
            self._shutdown(f"peer error: {text}", None, notify=False)

    def _on_hello(self, packet: Record) -> None:
        hello = Hello.from_value(packet)
        version = negotiate_version(hello.version)
        if version is None:
            raise ProtocolError(
                f"unsupported version {hello.version}", tuple(sorted(SUPPORTED_VERSIONS))
            )
        self.remote_hello = hello
        self.version = version
        if self.secrets is None:
            self._accept(hello)
        else:  # prove we know the secret; accept the far side once it has proved it too
            self._expected_proof = self._send_proof(hello)

    def _send_proof(self, hello: Hello) -> bytes:
        """Send our ``<auth proof>``; return the proof the far side must send."""
        assert self.secrets is not None and self._nonce is not None
        theirs = hello.auth.get("nonce")
        if theirs.__class__ is not bytes or len(theirs) != NONCE_SIZE:
            raise ProtocolError(
                "authentication failed: no nonce in the hello (this side requires the "
                "deployment's secret)"
            )
        role = hello.role if self.listener else self.role  # the dialer's claim
        name = hello.name if self.listener else self.name
        key = self.secrets.keys.get(role)
        if key is None:
            raise ProtocolError(f"authentication failed: no secret for the role {role!r} here")
        dialer, listener = (theirs, self._nonce) if self.listener else (self._nonce, theirs)
        mine, other = ("listener", "dialer") if self.listener else ("dialer", "listener")
        self._write(encode_frame(Record(AUTH, (proof(key, mine, role, name, dialer, listener),))))
        return proof(key, other, role, name, dialer, listener)

    def _on_auth(self, packet: Record) -> None:
        expected, self._expected_proof = self._expected_proof, None
        if expected is None:
            raise ProtocolError("unexpected auth packet")
        if len(packet.fields) != 1 or not proofs_match(expected, packet.fields[0]):
            hello = self.remote_hello
            assert hello is not None
            role = hello.role if self.listener else self.role
            raise ProtocolError(f"authentication failed: wrong secret for the role {role!r}")
        assert self.remote_hello is not None
        self._accept(self.remote_hello)

    def _accept(self, hello: Hello) -> None:
        """The far side's hello (and proof) are good: set the connection up."""
        version = self.version
        assert version is not None
        if self.authenticate is not None:
            refusal = self.authenticate(hello)
            if refusal is not None:
                raise ProtocolError(f"authentication failed: {refusal}")
        if callable(self.initial) and not isinstance(self.initial, Ref):
            chosen = self.initial(hello)
            if chosen is not None:
                self._membrane.export(chosen, oid=0, pinned=True)
        if not isinstance(self.handle_limits, int):
            self.max_handles = self.handle_limits.get(hello.role, 0)
        if version >= 2:  # nothing was encoded yet: proxies exist only from now on
            self._encoder = Encoder(self._membrane, self.limits, cache_slots=VALUE_CACHE_SLOTS)
        self._bare = version >= BARE_EVENTS_VERSION
        self.remote_initial = self._membrane.import_oid(0, pinned=True).ref
        self._membrane.live = True
        log.debug("%r: hello from %s %r (version %d)", self, hello.role, hello.name, version)
        self._ready_queued = True
        self._enqueue(self._ready)

    def _ready(self, turn: Turn) -> None:
        self._ready_queued = False
        if not self.closed and self.on_ready is not None:
            assert self.remote_hello is not None and self.remote_initial is not None
            self.on_ready(turn, self.remote_hello, self.remote_initial)

    def _on_turn(self, packet: Record, entries: list[_Entry], refs: int) -> None:
        if len(packet.fields) != 1 or packet.fields[0].__class__ is not tuple:
            raise ProtocolError("malformed turn: expected <turn [event ...]>")
        _check_turn_count(len(packet.fields[0]))  # also when not encoded as feds does
        self._check_forged()
        self._syncs_in = False
        items = packet.fields[0]
        if (
            len(items) >= actors.SCAN_IN_C
            and self._bare
            and not refs
            and not (self._applying or self._ready_queued)
        ):
            batches = self._message_batches(items)
            if batches is not None:
                self.stats.events_in += len(items)
                self._membrane.unheld = 0
                self._queue_batches(batches, entries, True)
                return
            batches = self._change_batches(items)
            if batches is not None:
                self.stats.events_in += len(items)
                self._membrane.unheld = 0
                self._queue_batches(batches, entries, False)
                return
        check = self._check_bare_event if self._bare else self._check_event
        self._take_ops([check(item) for item in items], entries, refs)

    def _take_ops(self, ops: list[tuple], entries: list[_Entry], refs: int) -> None:
        """Apply a packet's checked events now, or in a turn behind the relay's turns that
        wait (or, with a sync, in a turn of their own)."""
        self.stats.events_in += len(ops)
        if not ops:
            return
        if self._applying or self._ready_queued or self._syncs_in:
            self._applying += 1
            self._enqueue(lambda turn: self._apply(turn, ops, entries, refs))
        else:
            self._apply_now(ops, entries, refs)

    def _check_forged(self) -> None:
        forged = self._membrane.forged
        if forged is not None:
            raise ProtocolError(
                f"unknown oid {forged} in an embedded reference: a reference the "
                "receiver never gave (transient, or forged)"
            )

    def _lone_message(self, frame: bytes) -> bool:
        """Take a packet of one bare message, ``<turn [[oid value]]>``, whose oid is a small
        integer (as feds encodes it), without the general path's steps: pass it on as its bytes
        (:meth:`_pass_on`) or decode only its value and apply it as :meth:`_on_turn` would,
        with the same checks. False, having done nothing, for any other packet (another kind
        of oid, a peer before its hello is accepted): it takes the general path."""
        if not self._bare or self._expected_proof is not None:
            return False
        at = len(_LONE_MESSAGE)
        size = len(frame)
        head = frame[at] if size > at else 0xC1
        if head < 0x80:  # the oid as a positive fixint, or a uint 8 or 16
            start = at + 1
            oid = head
        elif head == 0xCC or head == 0xCD:
            start = at + head - 0xCA
            oid = int.from_bytes(frame[at + 1 : start], "big")
        else:
            return False
        if size <= start:  # no value: the general path says what is wrong
            return False
        payload = frame[start:]
        if not (self._applying or self._ready_queued or self._sync_pins) and self._pass_on(
            oid, payload
        ):
            return True
        value = self._frames.decoder.decode(payload, _MESSAGE_DEPTH)
        self._check_forged()
        if oid >= self._membrane.next_oid:  # never allocated here
            raise _bare_event_error((oid, value))
        self._syncs_in = False
        membrane = self._membrane
        self._take_ops([(MESSAGE, oid, value, None)], membrane.decoded, membrane.refs_decoded)
        return True

    def _pass_on(self, oid: int, payload: bytes) -> bool:
        """Pass a message to ``oid`` on as its bytes, where the route of its entry
        (:mod:`feds.routes`) sends any payload as it came to a proxy of another relay, or the
        fields of a record of one label and arity (:attr:`~feds.routes.Route.fields_of`: a
        client's record to local access, for a pattern binding each field), which the
        record's bytes hold behind its :func:`~feds.codec.record_prefix`: those bytes (after
        an array header for the fields) go into that relay's packet behind the proxy's oid,
        neither decoded nor encoded. Only for a payload of msgpack's own arrays and atoms
        (:meth:`~feds.codec.Decoder.is_plain`), which means the same on every link, and only
        where :func:`~feds.routes.follow` would follow that route (the scheduler idle, the
        entry's actor's routes standing) and the relay would apply the packet at once (the
        caller checks that no turn of this relay waits and no sync pins oids), with the same
        bookkeeping as those. False, having done nothing, otherwise: the message then takes
        the general path, which also refuses what is wrong with it."""
        entry = self._membrane.exports.get(oid)
        if entry is None:
            return False
        ref = entry.ref
        actor = ref.actor
        routes = actor.routes
        if routes is None or not ref.pure:
            return False
        variants = routes.get(ref)
        if not variants:
            return False
        route = variants[0]  # followed for every payload it takes, if no other comes first
        single = route.single
        if single is None:
            return False
        if route.select is not None:  # it takes the fields of records of one label and arity
            shape = route.fields_of
            if shape is None:
                return False
            prefix = record_prefix(*shape)
            if not payload.startswith(prefix):  # another payload, or one a cache holds
                return False
            payload = self._packer.pack_array_header(shape[1]) + payload[len(prefix) :]
        target, to, _value = single
        proxy = to.entity
        if proxy.__class__ is not _Proxy:
            return False
        out = proxy.relay
        scheduler = self.scheduler
        if (
            target is not out.actor
            or target.queued
            or out.closed
            or not actor.alive
            or scheduler.running
            or scheduler._queue
            or scheduler._open
        ):
            return False
        if len(payload) > out._event_limit - _EVENT_HEAD_MAX or not self._frames.decoder.is_plain(
            payload, _MESSAGE_DEPTH
        ):
            return False
        stats = self.stats
        stats.events_in += 1
        stats.passed_on += 1
        self.actor.work += 1  # as _queue_batches and follow count
        actor.work += 1
        scheduler.routed += 1
        out._take_encoded(proxy.oid, payload, not self._frames.buffered)
        membrane = self._membrane
        if membrane.dirty and self._flush_turn is None:
            membrane.collect()
        return True

    def _message_batches(self, items: tuple) -> dict[Actor, list[tuple]] | None:
        """What :meth:`_apply_now` would queue for a packet of bare messages, all to live oids
        of one actor, worked out in C (no Python step per event); None for any other packet,
        which then takes the general path, event by event: everything else, wrong or not, is
        left to that path's checks. Not while a sync pins oids (each message unpins); the caller
        asks only for packets of :data:`~feds.actor.SCAN_IN_C` events or more (for fewer, the
        loop is cheaper)."""
        if self._sync_pins or set(map(type, items)) != _TUPLE_ONLY or set(map(len, items)) != {2}:
            return None
        oids = list(map(actors.kind_of, items))  # an item's first field
        if set(map(type, oids)) != _INT_ONLY:  # not True for 1: the table would take it for 1
            return None
        entries = list(map(self._membrane.exports.get, oids))  # freed, unknown, negative: None
        if None in entries:
            return None
        refs = list(map(_entry_ref, entries))
        targets = set(map(_ref_actor, refs))
        if len(targets) != 1:
            return None
        events = zip(repeat(actors.MESSAGE), refs, map(_second, items), repeat(None))
        return {targets.pop(): list(events)}

    def _change_batches(self, items: tuple) -> dict[Actor, list[tuple]] | None:
        """What :meth:`_check_bare_event` of each item and then :meth:`_apply_now` would do for
        a packet of bare assertions followed by bare retractions (a run of changes, as a
        sender's commit encodes it: adds before removes), worked out in C, with no Python
        step per event: the same checks, the same bookkeeping (handle tables, local handles
        in order, the node's budget) and the same batch queued. Only for assertions to live
        oids of one actor that hold no reference (the caller checks that the packet has
        none), each retraction of a handle asserted in this packet or of one whose
        assertion was applied and holds no reference, all retracted at that one actor.
        None, having done nothing, for any other packet: it takes the general path, which
        also refuses what is wrong with it."""
        if set(map(type, items)) != _TUPLE_ONLY:
            return None
        lengths = list(map(len, items))
        k = lengths.count(3)
        if set(lengths[:k]) - _THREE or set(lengths[k:]) - _ONE:
            return None
        adds, removes = items[:k], items[k:]
        oids, handles = list(map(_first, adds)), list(map(_third, adds))
        gone = list(map(_first, removes))
        if not _INT_ONLY.issuperset(map(type, chain(oids, handles, gone))):
            return None  # (a sync's #t, or a bool where an int belongs)
        far, inbound = self._far_handles, self._inbound
        new, old = set(handles), set(gone)
        if (
            len(new) != k
            or len(old) != len(gone)
            or (k and (min(handles) < 0 or max(handles) >= _MAX_ID))
            or len(far) + k > self.max_handles
            or not far.keys().isdisjoint(new)
        ):
            return None
        old -= new  # retractions of assertions of earlier packets
        kept = list(map(inbound.get, old))  # each (local handle, references held, target)
        if None in kept or _DROPPED in kept or any(map(_second, kept)):
            return None  # never asserted, dropped, or holding references: the general path
        exported = list(map(self._membrane.exports.get, oids))
        if None in exported:
            return None
        refs = list(map(_entry_ref, exported))
        targets = set(map(_ref_actor, chain(refs, map(_third, kept))))
        if len(targets) != 1:
            return None
        budget = self.budget
        if budget is not None and not budget.take_many(k):
            return None
        locals_ = list(islice(self.scheduler.handles, k))
        far.update(zip(handles, oids, strict=True))
        inbound.update(zip(handles, zip(locals_, repeat(()), refs, strict=False), strict=True))
        held = list(map(inbound.pop, gone))
        deque(map(far.pop, gone), 0)
        if budget is not None:
            budget.give(len(gone))
        events = list(zip(repeat(actors.PUBLISH), refs, map(_second, adds), locals_))
        events += zip(repeat(actors.RETRACT), map(_third, held), repeat(None), map(_first, held))
        return {targets.pop(): events}

    def _check_event(self, item: Value) -> tuple:
        """Validate one ``[oid event]`` against the handle table; return it as an operation."""
        if item.__class__ is not tuple or len(item) != 2:
            raise ProtocolError("malformed event: expected [oid event]", _plain(item))
        oid, event = item
        if oid.__class__ is not int or not 0 <= oid < _MAX_ID:
            raise ProtocolError("malformed event: the oid is not a non-negative integer")
        if event.__class__ is not Record:
            raise ProtocolError("unknown event: not a record")
        label, fields = event.label, event.fields
        name = label.name if label.__class__ is Symbol else None  # a str compares fastest
        arity = len(fields)
        if name == _MESSAGE_NAME and arity == 1:
            kind = MESSAGE
        elif name == _ASSERT_NAME and arity == 2:
            kind = ASSERT
        elif name == _RETRACT_NAME and arity == 1:
            return self._check_retract(oid, fields[0])  # its oid is checked against the handle
        elif name == _SYNC_NAME and arity == 1:
            kind = SYNC
        else:
            raise ProtocolError(f"unknown event {_label_text(label)}/{arity}")
        if oid >= self._membrane.next_oid:  # never allocated here
            raise ProtocolError(f"unknown oid {oid}")
        if kind is MESSAGE:
            return (MESSAGE, oid, fields[0], None)
        if kind is ASSERT:
            return self._check_assert(oid, fields[0], fields[1])
        if fields[0].__class__ is not Ref:
            raise ProtocolError("malformed event: the peer of a sync is not a reference")
        self._syncs_in = True
        return (SYNC, oid, fields[0], None)

    def _check_bare_event(self, item: Value) -> tuple:
        """Validate one bare event (version 4) against the handle table; return it as an
        operation. Its length says its kind: ``[handle]`` a retraction, ``[oid value]`` a
        message, ``[oid value handle]`` an assertion, ``[oid peer #t]`` a sync."""
        if item.__class__ is not tuple:
            raise _bare_event_error(item)
        n = len(item)
        if n < 2:
            if n:
                return self._check_retract(None, item[0])
            raise _bare_event_error(item)
        oid = item[0]
        if oid.__class__ is not int or not 0 <= oid < self._membrane.next_oid or n > 3:
            raise _bare_event_error(item)
        if n == 2:
            return (MESSAGE, oid, item[1], None)
        third = item[2]
        if third is not True:
            return self._check_assert(oid, item[1], third)
        if item[1].__class__ is not Ref:
            raise ProtocolError("malformed event: the peer of a sync is not a reference")
        self._syncs_in = True
        return (SYNC, oid, item[1], None)

    def _check_assert(self, oid: int, value: Value, handle: Value) -> tuple:
        if handle.__class__ is not int or not 0 <= handle < _MAX_ID:
            raise ProtocolError("malformed event: the handle is not a non-negative integer")
        far_handles = self._far_handles
        if handle in far_handles:
            raise ProtocolError(f"handle {handle} reused while live")
        if len(far_handles) >= self.max_handles:
            raise ProtocolError(f"too many live handles (max {self.max_handles})")
        if self.budget is not None and not self.budget.take():
            raise ProtocolError(f"the node holds too many assertions (max {self.budget.limit})")
        far_handles[handle] = oid
        return (ASSERT, oid, value, handle)

    def _check_retract(self, oid: int | None, handle: Value) -> tuple:
        """A retraction of ``handle``, made at ``oid`` (None: at whichever oid it was made)."""
        if handle.__class__ is not int or not 0 <= handle < _MAX_ID:
            raise ProtocolError("malformed event: the handle is not a non-negative integer")
        owner = self._far_handles.pop(handle, None)
        if owner is None:
            raise ProtocolError(f"unknown handle {handle} retracted")
        if self.budget is not None:
            self.budget.give()
        if oid is not None and owner != oid:
            raise ProtocolError(f"handle {handle} retracted at oid {oid}, asserted at oid {owner}")
        return (RETRACT, owner, None, handle)

    # -- applying incoming events ----------------------------------------------------------------

    def _apply_now(self, ops: list[tuple], entries: list[_Entry], refs: int) -> None:
        """Apply a packet's events as it arrives, without a turn of the relay actor: queue them
        for their targets as :meth:`_apply`'s turn would have at its commit, with the same
        bookkeeping. Only when no turn of the relay actor that came before waits (an earlier
        packet's, or the one calling ``on_ready``) and the packet holds no sync (its answer
        is sent from a turn): the events then reach their targets in the order they would
        have, only sooner, as if the packet had arrived as the queue ran that turn. If the
        bookkeeping raises, the relay actor crashes as that turn's failure would crash it,
        and none of the packet is delivered."""
        membrane = self._membrane
        exports = membrane.exports
        inbound = self._inbound
        handles = self.scheduler.handles
        membrane.unheld = refs
        has_refs = refs > 0
        batches: dict[Actor, list[tuple]] = {}
        messages_only = True  # whether the packet may follow routes (feds.routes)
        try:
            for kind, oid, payload, handle in ops:
                if kind is RETRACT:
                    messages_only = False
                    held = self._forget(handle)
                    if held is None:
                        continue
                    local, target = held
                    event = (actors.RETRACT, target, None, local)
                else:
                    entry = exports.get(oid)
                    if entry is None:  # the oid was freed here: a late event, dropped
                        self._late()
                        if kind is ASSERT:
                            inbound[handle] = _DROPPED
                        continue
                    target = entry.ref
                    if kind is ASSERT:
                        messages_only = False
                        local = next(handles)
                        event = (actors.PUBLISH, target, payload, local)
                        held_entries = membrane.hold(payload) if has_refs else ()
                        inbound[handle] = (local, held_entries, target)
                    else:
                        event = (actors.MESSAGE, target, payload, None)
                        if self._sync_pins:
                            self._unpin(oid)
                batch = batches.get(target.actor)
                if batch is None:
                    batches[target.actor] = [event]
                else:
                    batch.append(event)
        except Exception as exc:
            self.scheduler.crash(self.actor, exc)
            return
        self._queue_batches(batches, entries, messages_only)

    def _queue_batches(
        self, batches: dict[Actor, list[tuple]], entries: list[_Entry], messages_only: bool
    ) -> None:
        """Queue a packet's events for their targets, as the relay actor's turn would at its
        commit (:meth:`_apply_now`); or, for a packet of messages with routes and no
        references, send on at once what the target's turns would send for them
        (:func:`feds.routes.follow`)."""
        self.actor.work += 1
        if not messages_only or entries or not follow(self.scheduler, self.actor, batches):
            self.scheduler.send(self.actor, batches)
        membrane = self._membrane
        if entries:  # the decoded references' counts last until the events are queued
            membrane.release(entries)
        if membrane.dirty and self._flush_turn is None:  # else that turn's commit collects
            membrane.collect()

    def _apply(self, turn: Turn, ops: list[tuple], entries: list[_Entry], refs: int) -> None:
        """Apply a packet's events. Its references were mapped and counted as it was decoded:
        those counts last until this turn commits (a message's references are transient),
        and an assertion or a sync counts what it holds once more for as long as it lasts."""
        self._applying -= 1
        if self.closed:
            return
        if self._goodbye is not None and not self._applying:  # once these are applied
            turn.on_commit(lambda: self._shutdown(self._goodbye, None, notify=False))  # type: ignore[arg-type]
        self._touch(turn)
        if entries:
            self._transient.extend(entries)
        self._membrane.unheld = refs
        has_refs = refs > 0
        for kind, oid, payload, handle in ops:
            entry = self._membrane.exports.get(oid)
            target = None if entry is None else entry.ref
            if kind is ASSERT:
                self._apply_assert(turn, target, payload, handle, has_refs)
            elif kind is RETRACT:
                self._apply_retract(turn, handle)
            elif kind is MESSAGE:
                self._apply_message(turn, oid, target, payload)
            else:
                self._apply_sync(turn, target, payload)

    def _apply_assert(
        self, turn: Turn, target: Ref | None, value: Value, handle: int, has_refs: bool
    ) -> None:
        if target is None:  # the oid was freed here: a late event, dropped
            self._late()
            self._inbound[handle] = _DROPPED
            return
        entries = self._membrane.hold(value) if has_refs else ()
        self._inbound[handle] = (turn.publish_untracked(target, value), entries, target)

    def _late(self) -> None:
        """Count an event for an oid freed here: the far side sent it before it learnt that."""
        self.stats.late_events_in += 1
        log.debug("%r: dropped a late event for a freed oid", self)

    def _apply_retract(self, turn: Turn, handle: int) -> None:
        held = self._forget(handle)
        if held is not None:
            local, target = held
            turn.retract_untracked(target, local)

    def _forget(self, handle: int) -> tuple[Handle, Ref] | None:
        """The far side retracts ``handle``: our local handle and target for it (None if it was
        dropped), the references it held released."""
        held = self._inbound.pop(handle, _DROPPED)
        if held is _DROPPED:
            return None
        local, entries, target = held  # type: ignore[misc]
        if entries:  # most assertions hold no reference
            self._membrane.release(entries)
        return local, target

    def _apply_message(self, turn: Turn, oid: int, target: Ref | None, value: Value) -> None:
        if target is None:
            self._late()
            return
        turn.message(target, value)
        if self._sync_pins:
            self._unpin(oid)

    def _unpin(self, oid: int) -> None:
        """A message to ``oid``: if it answers a sync we forwarded, the peer need not stay
        exported for that sync any longer."""
        pins = self._sync_pins.get(oid)
        if pins:
            if pins == 1:
                del self._sync_pins[oid]
            else:
                self._sync_pins[oid] = pins - 1
            self._membrane.release((self._membrane.exports[oid],))

    def _apply_sync(self, turn: Turn, target: Ref | None, peer: Ref) -> None:
        held = self._membrane.hold(peer)

        def answer(t: Turn) -> None:
            t.message(peer, True)
            self._hold_until_commit(t, held)

        if target is None:  # nothing left to wait for: answer at once
            answer(turn)
        else:
            turn.sync(target, answer)

    def _hold_until_commit(self, turn: Turn, entries: list[_Entry]) -> None:
        if not self.closed:
            self._touch(turn)
            self._transient.extend(entries)

    # -- outgoing events (from proxies: at their sender's commit, or in a relay actor's turn) -----

    def _send_assert(self, turn: Turn | None, oid: int, value: Value, handle: Handle) -> None:
        if self.closed:
            return
        item = (oid, value, handle) if self._bare else (oid, [_ASSERT_HEAD, value, handle])
        entries = self._emit(turn, item, _ASSERT_NAME)
        self._outbound[handle] = _DROPPED if entries is None else (oid, entries)

    def _send_asserts(self, run: list[tuple[int, Value, Handle]]) -> None:
        """:meth:`_send_assert` of each ``(oid, value, handle)`` of a batch taken at its
        sender's commit (:meth:`take`). Each assertion keeps the references it lifts (its own,
        released when it is retracted), so a run of several is encoded with one call only if
        it lifts none (data, the stream's case: each then keeps nothing); otherwise, or if one
        of them cannot be encoded, with one call each and no other, as :meth:`_send_messages`
        does. (For a lone assertion, one call each is the cheaper.)"""
        if self.closed:
            return
        membrane, outbound, limit = self._membrane, self._outbound, self._event_limit
        bare = self._bare
        items = run if bare else [(oid, [_ASSERT_HEAD, v, handle]) for oid, v, handle in run]
        if len(run) > 1:
            membrane.lifted = lifted = []
            encodings = self._encoder.encode_all(items, limit, lambda: not lifted)
            if encodings is not None:
                keeps = zip(map(_first, run), repeat(()))
                outbound.update(zip(map(_third, run), keeps, strict=False))
                self._add_events(encodings)
                return
            membrane.release(lifted)
        encode = self._encoder.encode
        encodings = []
        for (oid, _value, handle), item in zip(run, items, strict=True):
            membrane.lifted = lifted = []
            try:
                encodings.append(encode(item, max_size=limit))
            except CodecError as e:
                self._not_sent(_ASSERT_NAME, e)
                outbound[handle] = _DROPPED
                continue
            outbound[handle] = (oid, lifted)
        self._add_events(encodings)

    def _send_retract(self, turn: Turn | None, handle: Handle) -> None:
        if self.closed:
            return
        held = self._outbound.pop(handle, _DROPPED)
        if held is _DROPPED:
            return
        oid, entries = held  # type: ignore[misc]
        item = (handle,) if self._bare else (oid, [_RETRACT_HEAD, handle])
        self._emit(turn, item, _RETRACT_NAME, self._removals)
        self._membrane.release(entries)

    def _send_message(self, turn: Turn | None, oid: int, value: Value) -> None:
        if self.closed:
            return
        item = (oid, value) if self._bare else (oid, [_MESSAGE_HEAD, value])
        entries = self._emit(turn, item, _MESSAGE_NAME)
        if entries:
            self._transient.extend(entries)

    def _send_messages(self, run: list[tuple[int, Value]]) -> None:
        """:meth:`_send_message` of each ``(oid, value)`` of a batch taken at its sender's
        commit (:meth:`take`), with one encoding call for all of them; if one of them cannot be
        encoded, each is sent on its own, so that only that one is dropped (and logged)."""
        if self.closed:
            return
        items = run if self._bare else [(oid, [_MESSAGE_HEAD, value]) for oid, value in run]
        membrane = self._membrane
        membrane.lifted = lifted = []
        encodings = self._encoder.encode_all(items, self._event_limit)
        if encodings is None:
            membrane.release(lifted)
            for oid, value in run:
                self._send_message(None, oid, value)
            return
        self._add_events(encodings)
        if lifted:
            self._transient.extend(lifted)

    def _add_events(self, encodings: list[bytes]) -> None:
        """Add encoded events to the packet being gathered, sealing it first if it holds
        retractions of earlier turns (as :meth:`_emit` does)."""
        if self._after_removals:
            self._seal()
        self._events += encodings

    def _take_encoded(self, oid: int, payload: bytes, last: bool) -> None:
        """:meth:`take` of one message to the proxy of ``oid``, given the encoding of its value,
        which must hold no reference and nothing of a value cache (:meth:`_pass_on`).

        When this relay holds nothing else to send or release and the message is the ``last``
        one of its read, the packet the transport's next :meth:`data_to_send` would seal for
        it (nothing else is added before then: the scheduler is idle) is written at once, the
        same bytes without the steps of gathering events."""
        self.actor.work += 1
        event = b"\x92" + self._packer.pack(oid) + payload
        if (
            last
            and self._flush_turn is None
            and not (self._output or self._events or self._removals or self._transient)
            and not self._membrane.dirty
        ):
            self._write_turn([event])
            if self.on_output is not None:
                self.on_output()
            return
        self._flush_turn = None
        self._begin()
        self._add_events([event])
        self._flush()

    def _send_retracts(self, handles: list[Handle]) -> None:
        """:meth:`_send_retract` of each of ``handles``, as :meth:`_send_messages` sends
        messages (a retraction lifts no reference: it names only its handle)."""
        if self.closed:
            return
        outbound = self._outbound
        live = [handle for handle in handles if outbound.get(handle, _DROPPED) is not _DROPPED]
        if self._bare:
            items = [(handle,) for handle in live]
        else:
            items = [(outbound[handle][0], [_RETRACT_HEAD, handle]) for handle in live]  # type: ignore[index]
        encodings = self._encoder.encode_all(items, self._event_limit)
        if encodings is None:
            for handle in handles:
                self._send_retract(None, handle)
            return
        self._removals += encodings
        released: list[_Entry] = []
        for handle in handles:
            held = outbound.pop(handle, _DROPPED)
            if held is not _DROPPED:
                released += held[1]  # type: ignore[index]
        self._membrane.release(released)

    def _send_sync(self, turn: Turn | None, oid: int, peer: Ref) -> None:
        if self.closed:
            return
        item = (oid, peer, True) if self._bare else (oid, [_SYNC_HEAD, peer])
        entries = self._emit(turn, item, _SYNC_NAME)
        if not entries:
            return
        (entry,) = entries
        if entry.kind == MINE:  # keep the peer exported until the far side answers
            self._sync_pins[entry.oid] = self._sync_pins.get(entry.oid, 0) + 1
        else:
            self._transient.append(entry)

    def _emit(
        self, turn: Turn | None, item: tuple, name: str, into: list[bytes] | None = None
    ) -> list[_Entry] | None:
        """Encode one event into the packet being gathered (``into``: a list of its events
        other than ``_events``); None if it cannot be sent. ``turn``: the relay actor's turn
        sending it, or None for a batch taken at its sender's commit (:meth:`take`).

        ``item`` is the event as the agreed version has it on the wire: a bare array from
        version 4, else ``(oid, [head, field ...])`` (:func:`~feds.codec.record_head`), which
        encodes as ``[oid <name field ...>]`` without making the record. ``name``: the
        event's kind, for the log if it cannot be sent.
        """
        if self._flush_turn is not turn:  # the turn's first event (saves a call per event)
            self._touch(turn)
        membrane = self._membrane
        membrane.lifted = []
        try:  # on failure, the encoder forgets the cache definitions it made for this event
            data = self._encoder.encode(item, max_size=self._event_limit)
        except CodecError as e:
            self._not_sent(name, e)
            return None
        if into is not None:
            into.append(data)
        else:
            if self._after_removals:  # the far side would apply those after this: not joined
                self._seal()  # the earlier turns' packet
            self._events.append(data)
        return membrane.lifted

    def _not_sent(self, name: str, error: CodecError) -> None:
        """An outgoing ``name`` event could not be encoded: release what it lifted, log it
        and tell :attr:`on_drop`."""
        membrane = self._membrane
        membrane.release(membrane.lifted)
        log.warning("%r: dropped an outgoing %s event: %s", self, name, error)
        if self.on_drop is not None:
            self.on_drop(f"{name} not sent: {error}")

    # -- outgoing events at their sender's commit -----------------------------------------------

    def take(self, batch: list[tuple]) -> bool:
        """The relay actor's :attr:`~feds.actor.Actor.sink`: send a batch of events for proxies
        at once, at the commit of the turn that sent it, instead of in a turn of the relay
        actor. That turn would only have called the proxies, which only encode: this does the
        same, in the same order (adds before removes, as a turn would take them), and what it
        encodes joins the packet being gathered as that turn's would. The scheduler offers a
        batch only when no earlier one waits for the relay actor, so nothing is overtaken.

        A batch holding anything but proxies (a sync's reply entity), or more events than one
        packet, is left to a turn (False): the scheduler may run a big one in slices. If
        encoding raises, the relay actor crashes as its turn would have, sending none of it.
        A long batch is scanned in C (:data:`~feds.actor.SCAN_IN_C`), and if it holds only
        messages, they are gathered in C too.
        """
        n = len(batch)
        if n > TURN_PACKET_EVENTS:
            return False
        if n >= actors.SCAN_IN_C:
            if not _PROXY_ONLY.issuperset(map(_entity_class, map(actors.ref_of, batch))):
                return False
        else:
            for event in batch:
                if event[1].entity.__class__ is not _Proxy:
                    return False
        if self.closed:  # its proxies drop everything
            return True
        self._flush_turn = None  # what was gathered so far is committed
        self._begin()
        self.actor.work += n
        try:
            if n >= actors.SCAN_IN_C and _MESSAGES_ONLY.issuperset(map(actors.kind_of, batch)):
                oids = map(_oid_of, map(actors.ref_of, batch))
                self._send_messages(list(zip(oids, map(_third, batch), strict=True)))
                self._flush()
                return True
            if n > 1:
                batch = actors.adds_before_removes(batch)
            message, publish, retract = actors.MESSAGE, actors.PUBLISH, actors.RETRACT
            messages: list[tuple[int, Value]] = []  # consecutive messages, encoded together
            asserts: list[tuple[int, Value, Handle]] = []  # consecutive assertions, sent as a run
            retractions: list[Handle] = []  # encoded together: they come last in a packet anyway
            for kind, ref, payload, handle in batch:
                if kind == message:
                    if asserts:
                        self._send_asserts(asserts)
                        asserts = []
                    messages.append((ref.entity.oid, payload))
                    continue
                if messages:
                    self._send_messages(messages)
                    messages = []
                if kind == retract:
                    retractions.append(handle)
                elif kind == publish:
                    asserts.append((ref.entity.oid, payload, handle))
                else:
                    if asserts:
                        self._send_asserts(asserts)
                        asserts = []
                    self._send_sync(None, ref.entity.oid, payload)
            if messages:
                self._send_messages(messages)
            elif asserts:
                self._send_asserts(asserts)
            if retractions:
                self._send_retracts(retractions)
            self._flush()
        except Exception as exc:  # as a crash of the turn: nothing of it is sent
            del self._events[self._mark :]
            del self._removals[self._mark_removals :]
            self.scheduler.crash(self.actor, exc)
        return True

    # -- packets: one per run of turns -------------------------------------------------------------

    def _touch(self, turn: Turn) -> None:
        """Make sure the current turn flushes (and frees unused oids) when it commits."""
        if self._flush_turn is not turn:
            self._flush_turn = turn
            turn.on_commit(self._flush)
            self._begin()

    def _begin(self) -> None:
        """A turn, or a batch taken at its sender's commit, begins to send: mark where its
        events begin, and whether earlier ones left retractions it must not be joined after."""
        self._mark = len(self._events)
        self._mark_removals = removals = len(self._removals)
        self._after_removals = removals > 0

    def _flush(self) -> None:
        """The turn commits: tell the transport a packet is waiting, free what it left unused."""
        self._flush_turn = None
        if self.closed:
            return
        if (self._events or self._removals) and self.on_output is not None:
            self.on_output()
        membrane = self._membrane
        if self._transient:
            membrane.release(self._transient)
            self._transient.clear()
        if membrane.dirty:
            membrane.collect()

    def _seal(self) -> None:
        """Write the packet of the turns committed so far (not of one still running, which
        may yet fail), its retractions last as the far side applies them, so also when it is
        split."""
        if self._flush_turn is None:
            events, removals = self._events, self._removals
            self._events, self._removals = [], []
        else:
            cut, cut_removals = self._mark, self._mark_removals
            events, self._events = self._events[:cut], self._events[cut:]
            removals, self._removals = self._removals[:cut_removals], self._removals[cut_removals:]
        self._mark = self._mark_removals = 0
        self._after_removals = False
        if removals:
            events += removals
        if events:
            self._write_turns(events)

    def _write_turns(self, events: list[bytes]) -> None:
        """Write ``<turn [event ...]>`` packets, splitting only if one would exceed the frame
        size limit or :data:`TURN_PACKET_EVENTS`. The retractions come last (:meth:`_seal`),
        so a split packet never shows the far side a gap that the whole one would not."""
        limit = self._event_limit
        count = len(events)
        if count == 1 or (count <= TURN_PACKET_EVENTS and sum(map(len, events)) <= limit):
            self._write_turn(events)  # the usual case: one packet
            return
        start, size = 0, 0
        for i, data in enumerate(events):
            if i > start and (size + len(data) > limit or i - start == TURN_PACKET_EVENTS):
                self._write_turn(events[start:i])
                start, size = i, 0
            size += len(data)
        self._write_turn(events[start:])

    def _write_turn(self, events: list[bytes]) -> None:
        header = self._packer.pack_array_header(len(events))
        size = len(_TURN_PREFIX) + len(header) + sum(map(len, events))
        self.stats.events_out += len(events)
        self._add_output(b"".join([size.to_bytes(4, "big"), _TURN_PREFIX, header, *events]))

    def _add_output(self, frame: bytes) -> None:
        self._output.append(frame)
        self.stats.packets_out += 1
        self.stats.bytes_out += len(frame)

    def _write(self, frame: bytes) -> None:
        self._add_output(frame)
        if self.on_output is not None:
            self.on_output()

    # -- closing ----------------------------------------------------------------------------------

    def _fail(self, reason: str, detail: Value = None) -> None:
        log.warning("%r: protocol error, closing: %s", self, reason)
        self._shutdown(reason, detail, notify=True)

    def _shutdown(self, reason: str, detail: Value, notify: bool) -> None:
        if self.closed:
            return
        self.closed = True
        self.close_reason = reason
        if self._events or self._removals:  # what committed turns sent goes before the error
            self._seal()
        if notify:
            self._send_error(reason, detail)
        self._events.clear()
        self._removals.clear()
        self._transient.clear()
        self._membrane.clear()
        if self.budget is not None:
            self.budget.give(len(self._far_handles))
        self._far_handles.clear()
        self._frames = FrameDecoder()  # drop a partly received frame (up to max_frame_size)
        held = [(h[0], h[2]) for h in self._inbound.values() if h is not _DROPPED]  # type: ignore[index]
        self._inbound.clear()
        self._outbound.clear()
        self._sync_pins.clear()
        if self.actor.alive:  # retract everything the far side asserted here, after this turn

            def stop(turn: Turn) -> None:
                for local, target in held:
                    turn.retract_untracked(target, local)
                turn.stop_actor()

            self.scheduler.enqueue(self.actor, self.actor.root, stop)
        else:  # crashed: no turn of it runs again, and the one that failed sent nothing
            self.scheduler.withdraw(held)
        if self.on_output is not None:
            self.on_output()
        if self.on_close is not None:
            self.on_close(self)

    def _send_error(self, reason: str, detail: Value) -> None:
        """Queue ``<error reason detail>`` (the detail is dropped if it cannot be encoded)."""
        encoder = _ERROR_ENCODER  # the default limits: an error packet is small and the last one
        try:
            frame = encoder.encode_frame(Record(ERROR, (reason, detail)))
        except CodecError:
            frame = encoder.encode_frame(Record(ERROR, (reason[:1000], None)))
        self._add_output(frame)

    def _actor_exited(self, actor: Actor) -> None:
        if not self.closed:
            reason = f"relay actor stopped: {actor.exit_reason!r}"
            log.error("%r: %s", self, reason)
            self._shutdown(reason, None, notify=True)

    # -- helpers ----------------------------------------------------------------------------------

    def _enqueue(self, action: Callable[[Turn], None]) -> None:
        self.scheduler.enqueue(self.actor, self.actor.root, action)

    def _inert(self) -> Ref:
        if self._inert_ref is None:
            self._inert_ref = Ref(self.actor.root, _Inert())
        return self._inert_ref


def _label_name(label: Value) -> str | None:
    """The name of a symbol label (compared as a str: cheaper than ``Symbol.__eq__``)."""
    return label.name if label.__class__ is Symbol else None


def _label_text(label: Value) -> str:
    return label.name if label.__class__ is Symbol else repr(_plain(label))


def exchange(a: Relay, b: Relay) -> int:
    """Move every pending byte from ``a`` to ``b`` and back once; return how many moved.

    The simplest in-memory link, for tests and single-threaded drivers: call it between runs of
    the scheduler(s) until it returns 0 and no turns are left.
    """
    ab = a.data_to_send()
    if ab:
        b.receive(ab)
    ba = b.data_to_send()
    if ba:
        a.receive(ba)
    return len(ab) + len(ba)


def _bare_event_error(item: Value) -> ProtocolError:
    """What is wrong with a bare event whose shape or oid the fast check refused."""
    if item.__class__ is not tuple or not 1 <= len(item) <= 3:
        return ProtocolError("malformed event: expected an array of 1 to 3 items", _plain(item))
    oid = item[0]
    if oid.__class__ is not int or not 0 <= oid < _MAX_ID:
        return ProtocolError("malformed event: the oid is not a non-negative integer")
    return ProtocolError(f"unknown oid {oid}")  # never allocated here
