"""Authentication of connections: per-role shared secrets and an HMAC challenge-response.

A deployment has one secret per role (``peer`` for its nodes, ``client`` for applications,
``admin`` for tools such as ``feds status``), kept in a *secret file* (TOML)::

    peer = "…"     # only the nodes know this one
    client = "…"
    admin = "…"

Nodes read all three; a client's file need only hold the secret of its own role. Knowing the
``client`` secret therefore does not let an application claim the ``peer`` role (join as a child
node and receive every subscription) or the ``admin`` role (read ``status``).

The handshake (``protocols/wire.md``, "Authentication"): each side puts a fresh random nonce in
its hello; once it has the other's hello, each sends ``<auth proof>`` with
``proof = HMAC-SHA256(secret of the dialer's role, "feds-auth-v1" side role name nonce-d nonce-l)``
where ``side`` says which end computed it (``dialer``/``listener``), so one side's proof is never
valid as the other's, and ``nonce-d``/``nonce-l`` are the dialer's and the listener's nonces. The
secret never crosses the wire; proofs are compared in constant time; a recorded handshake replayed
to a node fails, because the node's nonce is new. Both sides prove themselves (a client also knows
it reached a node of its deployment).
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import tomllib
from dataclasses import dataclass
from os import PathLike
from pathlib import Path

__all__ = ["NONCE_SIZE", "AuthError", "Secrets", "new_nonce", "proof", "proofs_match"]

NONCE_SIZE = 16
ROLES = ("peer", "client", "admin")
MIN_SECRET = 16
"""Characters a secret needs at least (a short one could be guessed offline from a handshake)."""


class AuthError(ValueError):
    """A secret file that cannot be used; the message says why."""


@dataclass(frozen=True)
class Secrets:
    """The secrets this process knows, by role."""

    keys: dict[str, bytes]

    def __post_init__(self) -> None:
        for role, key in self.keys.items():
            if role not in ROLES:
                raise AuthError(f"unknown role {role!r} (roles: {', '.join(ROLES)})")
            if len(key) < MIN_SECRET:
                raise AuthError(f"the {role} secret is shorter than {MIN_SECRET} characters")

    @classmethod
    def load(cls, path: str | PathLike[str]) -> Secrets:
        """Read a secret file (TOML: ``role = "secret"``)."""
        try:
            doc = tomllib.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, tomllib.TOMLDecodeError) as exc:
            raise AuthError(f"cannot read the secret file {path}: {exc}") from None
        keys = {}
        for role, value in doc.items():
            if not isinstance(value, str):
                raise AuthError(f"{path}: {role} must be a string")
            keys[role] = value.encode()
        if not keys:
            raise AuthError(f"{path}: no secret in it (expected peer, client and/or admin)")
        return cls(keys)

    @classmethod
    def generate(cls) -> Secrets:
        """Fresh random secrets for every role (``feds topology secret``, tests)."""
        return cls({role: secrets.token_urlsafe(32).encode() for role in ROLES})

    def dumps(self) -> str:
        return "".join(f'{role} = "{key.decode()}"\n' for role, key in self.keys.items())


def new_nonce() -> bytes:
    return secrets.token_bytes(NONCE_SIZE)


def proof(key: bytes, side: str, role: str, name: str, dialer: bytes, listener: bytes) -> bytes:
    """What ``side`` (``"dialer"`` or ``"listener"``) sends to prove it knows ``key``."""
    message = b"\0".join(
        [b"feds-auth-v1", side.encode(), role.encode(), name.encode(), dialer, listener]
    )
    return hmac.new(key, message, hashlib.sha256).digest()


def proofs_match(expected: bytes, received: object) -> bool:
    return isinstance(received, bytes) and hmac.compare_digest(expected, received)
