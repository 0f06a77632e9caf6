"""Micro-benchmark of feds.codec against bare msgpack: small records, turn packets, value cache.

Three tables, times in CPU time (``time.process_time``, steady on a shared machine), medians of
``--repeat`` runs:

1. **Small values**, µs per call: each feds value against the plain list msgpack would carry
   for the same data (a record ``<temp "room-17" 21.5>`` against ``["temp", "room-17", 21.5]``).
2. **Turn packets**, ns per event: a packet ``<turn [event ...]>`` of 100 events of one kind
   (bare events of wire version 4: ``[oid value]`` for a message, ...), as a relay makes it
   (each event encoded on its own with the relay's value cache and embedded hooks, then
   spliced into one frame) and as it decodes it (the whole frame at once).
   The kinds are what crosses a link in the overlay benchmarks: a client's messages,
   assertions and retractions of ``<bench i payload>``, an ``Observe`` of a pattern, and one
   hop of each protocol's message (aggregate-subs ``<pub f pattern [i payload]>`` with the
   pattern cached, observer-flood ``[[i payload]]``, copy-up ``<link f <bench i payload>>``).
   The payloads are 64 random bytes (fixed seed), so some hold the bytes 0x7f and 0xff that
   binary data has and NaNs need. The floor is the same data as plain msgpack (records as
   lists headed by their label, references as ``[0 oid]``) through ``Packer.pack`` per event
   and ``unpackb`` per frame, with no hooks.
3. **The value cache** on an aggregate-subs message whose pattern was sent before: encoding
   and decoding it alone, and decoding a turn packet of 100 such events (per event), without
   and with the cache.

Run: ``.venv/bin/python benchmarks/codec.py [--number N] [--repeat R]``
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
import timeit
from collections.abc import Callable
from pathlib import Path

import msgpack

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from feds.codec import Decoder, Encoder, decode, encode
from feds.syntax import parse, parse_pattern
from feds.values import Embedded, FrozenDict, Record, Symbol, Value

CASES: list[tuple[str, object]] = [
    ('<temp "room-17" 21.5>', ["temp", "room-17", 21.5]),
    ('<present "Alice">', ["present", "Alice"]),
    ("<ack 42>", ["ack", 42]),
    (
        '<reading <sensor "s-1" 7> [1.5 2.5 3.5] {unit: "C"}>',
        ["reading", ["sensor", "s-1", 7], [1.5, 2.5, 3.5], {"unit": "C"}],
    ),
]

EVENTS = 100  # per turn packet
CACHE_SLOTS = 1024  # as a relay's (feds.relay.VALUE_CACHE_SLOTS)
TURN = Symbol("turn")
BENCH, PUB, LINK, OBSERVE = map(Symbol, ("bench", "pub", "link", "Observe"))


def median_us(fn: Callable[[], object], number: int, repeat: int = 5) -> float:
    """Median over ``repeat`` runs of the CPU time of one call, in microseconds."""
    times = timeit.repeat(fn, number=number, repeat=repeat, timer=time.process_time)
    return statistics.median(times) / number * 1e6


def bench_case(text: str, plain: object, number: int, repeat: int) -> tuple[float, ...]:
    value = parse(text)
    data, plain_data = encode(value), msgpack.packb(plain)
    assert decode(data) == value
    return (
        median_us(lambda: encode(value), number, repeat),
        median_us(lambda: msgpack.packb(plain), number, repeat),
        median_us(lambda: decode(data), number, repeat),
        median_us(lambda: msgpack.unpackb(plain_data), number, repeat),
    )


# ---------------------------------------------------------------------------------------------
# Turn packets


class BenchRef(Embedded):
    """A reference as a relay decodes one (it compares by oid, like feds.relay.WireRef)."""

    __slots__ = ("oid",)

    def __init__(self, oid: int) -> None:
        self.oid = oid

    def __eq__(self, other: object) -> bool:
        return other.__class__ is BenchRef and other.oid == self.oid  # type: ignore[attr-defined]

    def __hash__(self) -> int:
        return hash(self.oid)


class Hooks:
    """Embedded hooks that do what a relay's do: ``[0 oid]`` on the wire, checked on the way in."""

    def encode_embedded(self, obj: Embedded) -> Value:
        return (0, obj.oid)  # type: ignore[attr-defined]

    def decode_embedded(self, v: Value) -> Embedded:
        if not (v.__class__ is tuple and len(v) == 2 and v[0] == 0 and v[1].__class__ is int):
            raise ValueError(f"malformed reference {v!r}")
        return BenchRef(v[1])


def packet_kinds() -> dict[str, list[tuple]]:
    """100 bare events of each kind a link carries in the overlay benchmarks: ``(oid, value)``
    a message, ``(oid, value, handle)`` an assertion, ``(handle,)`` a retraction."""
    rng = random.Random(12)
    payloads = [rng.randbytes(64) for _ in range(EVENTS)]
    pattern = parse_pattern("<bench $i $payload>")[0]
    interned = decode(encode(pattern))  # as a node holds it: decoded, so interned (cacheable)
    ref = BenchRef(1)

    def bench(i: int) -> Record:
        return Record(BENCH, (i, payloads[i]))

    return {
        "client message <bench i p>": [(0, bench(i)) for i in range(EVENTS)],
        "client assert <bench i p>": [(0, bench(i), 1000 + i) for i in range(EVENTS)],
        "client retract": [(1000 + i,) for i in range(EVENTS)],
        "assert <Observe pattern ref>": [
            (0, Record(OBSERVE, (pattern, BenchRef(i))), 1000 + i) for i in range(EVENTS)
        ],
        "aggregate-subs hop <pub f pat [i p]>": [
            (2, Record(PUB, (ref, interned, (i, payloads[i])))) for i in range(EVENTS)
        ],
        "observer-flood hop [[i p]]": [(3, ((i, payloads[i]),)) for i in range(EVENTS)],
        "copy-up hop <link f <bench i p>>": [
            (1, Record(LINK, (ref, bench(i)))) for i in range(EVENTS)
        ],
    }


def plain(v: Value) -> object:
    """``v`` as bare msgpack data: records as lists headed by their label, references as
    ``[0 oid]``, symbols as strings."""
    if v.__class__ is Record:
        return [plain(v.label), *map(plain, v.fields)]
    if v.__class__ is Symbol:
        return v.name
    if v.__class__ is tuple:
        return list(map(plain, v))
    if v.__class__ is FrozenDict:
        return {plain(k): plain(x) for k, x in v.items()}
    if v.__class__ is BenchRef:
        return [0, v.oid]
    return v


def splice(events: list[bytes]) -> bytes:
    """The body of ``<turn [event ...]>`` from events encoded one by one (as feds.relay does)."""
    prefix = encode(Record(TURN, ((),)))[:-1]  # up to the empty events array's header
    return prefix + msgpack.Packer().pack_array_header(len(events)) + b"".join(events)


def packet_row(events: list[tuple], number: int, repeat: int) -> tuple[float, ...]:
    """ns per event: (encode, pack, decode, unpackb) of one turn packet of ``events``."""
    hooks = Hooks()
    encoder = Encoder(hooks, cache_slots=CACHE_SLOTS)
    decoder = Decoder(hooks, cache_slots=CACHE_SLOTS)

    def encode_all() -> list[bytes]:
        return [encoder.encode(e) for e in events]

    decoder.decode(splice(encode_all()))  # definitions cross once, as on a live link
    body = splice(encode_all())
    value = decoder.decode(body)
    assert value == Record(TURN, (tuple(events),)), "the packet does not decode to its events"

    pack = msgpack.Packer().pack
    plain_events = [plain(e) for e in events]
    plain_body = msgpack.packb(["turn", plain_events])
    per = 1e3 / len(events)  # µs per packet -> ns per event
    return (
        median_us(encode_all, number, repeat) * per,
        median_us(lambda: [pack(e) for e in plain_events], number, repeat) * per,
        median_us(lambda: decoder.decode(body), number, repeat) * per,
        median_us(lambda: msgpack.unpackb(plain_body, strict_map_key=False), number, repeat) * per,
    )


# ---------------------------------------------------------------------------------------------
# The value cache


def cache_rows(number: int, repeat: int) -> list[tuple[str, float, float]]:
    """(what, µs without the cache, µs with it) for a message whose pattern is cached."""
    pattern = decode(encode(parse_pattern("<bench $i $payload>")[0]))  # interned, as forwarded
    message = Record(PUB, ("f", pattern, (7, bytes(range(64)))))
    packet = Record(TURN, (tuple((0, message) for _ in range(EVENTS)),))
    uncached, cached = Encoder(), Encoder(cache_slots=CACHE_SLOTS)
    receiver = Decoder(cache_slots=CACHE_SLOTS)
    receiver.decode(cached.encode(pattern))  # the definition crosses once
    rows = [
        (
            "encode one message",
            median_us(lambda: uncached.encode(message), number, repeat),
            median_us(lambda: cached.encode(message), number, repeat),
        )
    ]
    for what, value, per in (
        ("decode one message", message, 1),
        (f"decode a turn packet of {EVENTS} (per event)", packet, EVENTS),
    ):
        data, short = uncached.encode(value), cached.encode(value)
        assert receiver.decode(short) == value and len(short) < len(data)
        n = max(1, number // per)
        rows.append(
            (
                what,
                median_us(lambda d=data: decode(d), n, repeat) / per,
                median_us(lambda s=short: receiver.decode(s), n, repeat) / per,
            )
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--number", type=int, default=50_000, help="calls per timing run")
    parser.add_argument("--repeat", type=int, default=5, help="timing runs (median; default 5)")
    args = parser.parse_args()
    number, repeat = args.number, args.repeat

    columns = ("encode", "packb", "ratio", "decode", "unpackb", "ratio")
    header = f"{'value':<52}" + "".join(f" {c:>7}" for c in columns)
    print(header)
    print("-" * len(header))
    for text, plain_value in CASES:
        enc, packb, dec, unpackb = bench_case(text, plain_value, number, repeat)
        print(
            f"{text:<52} {enc:7.2f} {packb:7.2f} {enc / packb:7.1f} "
            f"{dec:7.2f} {unpackb:7.2f} {dec / unpackb:7.1f}"
        )
    print(f"\ntimes in µs per call, CPU time, median of {repeat} runs; ratio = feds / msgpack\n")

    title = f"turn packet of {EVENTS} events"
    columns = ("encode", "pack", "ratio", "decode", "unpackb", "ratio")
    header = f"{title:<40}" + "".join(f" {c:>8}" for c in columns)
    print(header)
    print("-" * len(header))
    packets = max(1, number // (10 * EVENTS))
    for what, events in packet_kinds().items():
        enc, pack, dec, unpackb = packet_row(events, packets, repeat)
        print(
            f"{what:<40} {enc:8.0f} {pack:8.0f} {enc / pack:8.1f} "
            f"{dec:8.0f} {unpackb:8.0f} {dec / unpackb:8.1f}"
        )
    print(
        f"\nns per event, CPU time, median of {repeat} runs of {packets} packets;"
        " ratio = feds / bare msgpack of the same data\n"
    )

    title = "<pub f pattern [i payload]>, pattern cached"
    header = f"{title:<52} {'plain':>7} {'cached':>7} {'ratio':>7}"
    print(header)
    print("-" * len(header))
    for what, without, with_cache in cache_rows(number, repeat):
        print(f"{what:<52} {without:7.2f} {with_cache:7.2f} {with_cache / without:7.2f}")


if __name__ == "__main__":
    main()
