"""Micro-benchmark of feds.codec against plain msgpack on small records, and of its value cache.

Each feds value is compared with the plain list msgpack would carry for the same data (a record
``<temp "room-17" 21.5>`` against ``["temp", "room-17", 21.5]``). Times are the median of 5 runs,
in microseconds per call; the ratio is feds time over plain msgpack time.

A second table shows what a relay's value cache saves on an aggregate-subs message
``<pub f pattern [i payload]>`` whose pattern was sent before: encoding and decoding it alone,
and decoding a turn packet of 100 such events (per event), without and with the cache.

Run: ``.venv/bin/python benchmarks/codec.py [--number N]``
"""

from __future__ import annotations

import argparse
import statistics
import timeit
from collections.abc import Callable

import msgpack

from feds.codec import Decoder, Encoder, decode, encode
from feds.syntax import parse, parse_pattern
from feds.values import Record, Symbol

CASES: list[tuple[str, object]] = [
    ('<temp "room-17" 21.5>', ["temp", "room-17", 21.5]),
    ('<present "Alice">', ["present", "Alice"]),
    ("<ack 42>", ["ack", 42]),
    (
        '<reading <sensor "s-1" 7> [1.5 2.5 3.5] {unit: "C"}>',
        ["reading", ["sensor", "s-1", 7], [1.5, 2.5, 3.5], {"unit": "C"}],
    ),
]


def median_us(fn: Callable[[], object], number: int, runs: int = 5) -> float:
    """Median over ``runs`` of the time of one call, in microseconds."""
    times = timeit.repeat(fn, number=number, repeat=runs)
    return statistics.median(times) / number * 1e6


def bench_case(text: str, plain: object, number: int) -> tuple[float, float, float, float]:
    value = parse(text)
    data, plain_data = encode(value), msgpack.packb(plain)
    assert decode(data) == value
    return (
        median_us(lambda: encode(value), number),
        median_us(lambda: msgpack.packb(plain), number),
        median_us(lambda: decode(data), number),
        median_us(lambda: msgpack.unpackb(plain_data), number),
    )


def cache_rows(number: int) -> list[tuple[str, float, float]]:
    """(what, µs without the cache, µs with it) for a message whose pattern is cached."""
    pattern = decode(encode(parse_pattern("<bench $i $payload>")[0]))  # interned, as forwarded
    message = Record(Symbol("pub"), ("f", pattern, (7, bytes(range(64)))))
    packet = Record(Symbol("turn"), (tuple((0, message) for _ in range(100)),))
    plain, cached = Encoder(), Encoder(cache_slots=1024)
    receiver = Decoder(cache_slots=1024)
    receiver.decode(cached.encode(pattern))  # the definition crosses once
    rows = [
        (
            "encode one message",
            median_us(lambda: plain.encode(message), number),
            median_us(lambda: cached.encode(message), number),
        )
    ]
    for what, value, per in (
        ("decode one message", message, 1),
        ("decode a turn packet of 100 (per event)", packet, 100),
    ):
        data, short = plain.encode(value), cached.encode(value)
        assert receiver.decode(short) == value and len(short) < len(data)
        n = max(1, number // per)
        rows.append(
            (
                what,
                median_us(lambda d=data: decode(d), n) / per,
                median_us(lambda s=short: receiver.decode(s), n) / per,
            )
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--number", type=int, default=50_000, help="calls per timing run")
    args = parser.parse_args()

    columns = ("encode", "packb", "ratio", "decode", "unpackb", "ratio")
    header = f"{'value':<52}" + "".join(f" {c:>7}" for c in columns)
    print(header)
    print("-" * len(header))
    for text, plain in CASES:
        enc, packb, dec, unpackb = bench_case(text, plain, args.number)
        print(
            f"{text:<52} {enc:7.2f} {packb:7.2f} {enc / packb:7.1f} "
            f"{dec:7.2f} {unpackb:7.2f} {dec / unpackb:7.1f}"
        )
    print("\ntimes in µs per call, median of 5 runs; ratio = feds / plain msgpack\n")
    title = "<pub f pattern [i payload]>, pattern cached"
    header = f"{title:<52} {'plain':>7} {'cached':>7} {'ratio':>7}"
    print(header)
    print("-" * len(header))
    for what, without, with_cache in cache_rows(args.number):
        print(f"{what:<52} {without:7.2f} {with_cache:7.2f} {with_cache / without:7.2f}")


if __name__ == "__main__":
    main()
