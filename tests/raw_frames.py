"""Test helper: frames holding WireRefs as they travel, to forge what a relay receives."""

from __future__ import annotations

from feds.codec import encode_frame
from feds.relay import WireRef


class RawRefs:
    """Codec hooks writing a WireRef as the [kind oid] pair it stands for."""

    def encode_embedded(self, obj: WireRef) -> tuple[int, int]:
        return (obj.kind, obj.oid)

    def decode_embedded(self, v: object) -> object:
        raise AssertionError("only for encoding")


def raw_frame(v: object) -> bytes:
    """One frame holding ``v``, its WireRefs written as they are."""
    return encode_frame(v, embedded=RawRefs())
