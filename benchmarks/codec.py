"""Micro-benchmark of feds.codec against plain msgpack on small records.

Each feds value is compared with the plain list msgpack would carry for the same data (a record
``<temp "room-17" 21.5>`` against ``["temp", "room-17", 21.5]``). Times are the median of 5 runs,
in microseconds per call; the ratio is feds time over plain msgpack time.

Run: ``.venv/bin/python benchmarks/codec.py [--number N]``
"""

from __future__ import annotations

import argparse
import statistics
import timeit
from collections.abc import Callable

import msgpack

from feds.codec import decode, encode
from feds.syntax import parse

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
    print("\ntimes in µs per call, median of 5 runs; ratio = feds / plain msgpack")


if __name__ == "__main__":
    main()
