"""Test helper: frames holding WireRefs as they travel, to forge what a relay receives."""

from __future__ import annotations

from feds.codec import encode_frame
from feds.relay import MINE
from feds.values import Embedded


class WireRef(Embedded):
    """An embedded reference as it travels: ``[kind oid]``, in the sender's terms (``MINE``:
    the sender exports it)."""

    __slots__ = ("kind", "oid")

    def __init__(self, kind: int, oid: int) -> None:
        self.kind = kind
        self.oid = oid

    def __eq__(self, other: object) -> bool:
        return (
            other.__class__ is WireRef
            and other.kind == self.kind  # type: ignore[attr-defined]
            and other.oid == self.oid  # type: ignore[attr-defined]
        )

    def __hash__(self) -> int:
        return hash((WireRef, self.kind, self.oid))

    def __repr__(self) -> str:
        return f"WireRef({'mine' if self.kind == MINE else 'yours'}, {self.oid})"


class RawRefs:
    """Codec hooks writing a WireRef as the [kind oid] pair it stands for."""

    def encode_embedded(self, obj: WireRef) -> tuple[int, int]:
        return (obj.kind, obj.oid)

    def decode_embedded(self, v: object) -> object:
        raise AssertionError("only for encoding")


def raw_frame(v: object) -> bytes:
    """One frame holding ``v``, its WireRefs written as they are."""
    return encode_frame(v, embedded=RawRefs())
