"""The pSpaces JSON protocol as jSpace speaks it (sans-IO): typed values, messages, line framing.

One JSON object per line. A request is ``{"messageType": "PUT_REQUEST" | "GET_REQUEST" |
"QUERY_REQUEST", "target": space, "blocking": bool, "all": bool, "tuple" | "template": [...],
"clientSession": "n"}``; the seven operations are those three types and the two flags
(``getp = GET(blocking=false, all=false)``, ``queryAll = QUERY(false, true)``...). An answer is
``{"messageType": "PUT_RESPONSE" | "GET_RESPONSE" | "FAILURE", "status": bool, "statusCode":
"200" | "400" | "500", "statusMessage": ..., "tuples": [...], "clientSession": "n"}`` (query
answers are ``GET_RESPONSE`` too). Values travel as ``{"type": uri, "value": v}`` and template
fields as ``{"formal": true, "value": uri}`` or ``{"formal": false, "value": typed}``.

Where jSpace's server gives no answer at all (bad JSON, an unknown message type or type URI,
guideline-style ``action`` fields) we raise :class:`BadRequest`, which the gate answers with
``FAILURE``/400 and the client's session, keeping the connection open.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

from feds.spaces import jtypes
from feds.spaces.jtypes import Byte, Char, Float, JavaObject, Long, SpaceTypeError
from feds.spaces.templates import Formal, type_name

MAX_LINE = 16 * 1024 * 1024
"""The longest line a reader accepts (bytes); a longer one is refused and the connection closed."""

REQUEST_TYPES = ("PUT_REQUEST", "GET_REQUEST", "QUERY_REQUEST")


class BadRequest(ValueError):
    """A line that is not a request we can serve; ``session`` is echoed in the FAILURE answer."""

    def __init__(self, reason: str, session: str | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.session = session


# --------------------------------------------------------------------------------------------
# Values and template fields


def encode_value(value: Any) -> dict:
    """A tuple field as ``{"type": uri, "value": json}``."""
    uri = jtypes.type_uri(value)
    cls = value.__class__
    if cls is tuple:
        payload: Any = encode_tuple(value)
    elif cls in (Long, Float, Char, Byte, JavaObject):
        payload = value.value
    else:
        payload = value
    if isinstance(payload, float) and not math.isfinite(payload):
        raise SpaceTypeError(f"{value!r}: JSON has no NaN or infinity")
    return {"type": uri, "value": payload}


def encode_tuple(fields: tuple) -> list:
    return [encode_value(v) for v in jtypes.check_tuple(fields)]


def _number(x: Any, what: str) -> float:
    if isinstance(x, bool) or not isinstance(x, int | float):
        raise SpaceTypeError(f"{what} needs a number, got {x!r}")
    return float(x)


def decode_value(obj: Any) -> Any:
    """A tuple field from ``{"type": uri, "value": json}``; SpaceTypeError if it is not one."""
    if not isinstance(obj, dict) or not isinstance(obj.get("type"), str):
        raise SpaceTypeError(f"a typed value is {{'type': uri, 'value': v}}, got {obj!r}")
    uri, x = obj["type"], obj.get("value")
    if uri == jtypes.INT:
        return jtypes._integral(x, jtypes.INT_MIN, jtypes.INT_MAX, "int")
    if uri == jtypes.LONG:
        return Long(x)
    if uri == jtypes.DOUBLE:
        return _number(x, "double")
    if uri == jtypes.FLOAT:
        return Float(_number(x, "float"))
    if uri == jtypes.BOOLEAN:
        if not isinstance(x, bool):
            raise SpaceTypeError(f"boolean needs true or false, got {x!r}")
        return x
    if uri == jtypes.STRING:
        if not isinstance(x, str):
            raise SpaceTypeError(f"string needs a string, got {x!r}")
        return x
    if uri == jtypes.CHAR:
        return Char(x)
    if uri == jtypes.BYTE:
        return Byte(x)
    if uri == jtypes.TUPLE:
        return decode_tuple(x)
    name = type_name(uri)  # raises for pspace:nope and other non-class names
    if name != uri:  # java.lang.Integer and friends: decode as the pSpaces type
        return decode_value({"type": name, "value": x})
    return JavaObject.of(uri, x)


def decode_tuple(items: Any) -> tuple:
    if not isinstance(items, list):
        raise SpaceTypeError(f"a tuple is a JSON array of typed values, got {items!r}")
    return tuple(decode_value(v) for v in items)


def encode_field(field: Any) -> dict:
    if field.__class__ is Formal:
        return {"formal": True, "value": field.uri}
    return {"formal": False, "value": encode_value(field)}


def decode_field(obj: Any) -> Any:
    if not isinstance(obj, dict):
        raise SpaceTypeError(f"a template field is {{'formal': bool, 'value': ...}}, got {obj!r}")
    if obj.get("formal", False) is True:
        if not isinstance(obj.get("value"), str):
            raise SpaceTypeError(f"a formal field's value is a type URI, got {obj.get('value')!r}")
        return Formal(obj["value"])
    return decode_value(obj.get("value"))


def decode_template(items: Any) -> tuple:
    if not isinstance(items, list):
        raise SpaceTypeError(f"a template is a JSON array of fields, got {items!r}")
    return tuple(decode_field(f) for f in items)


# --------------------------------------------------------------------------------------------
# Messages


@dataclass(frozen=True, slots=True)
class Request:
    """A decoded request: ``op`` is ``put``, ``get`` or ``query``; ``fields`` the tuple/template."""

    op: str
    target: str
    fields: tuple
    blocking: bool = False
    all: bool = False
    session: str | None = None

    @property
    def removes(self) -> bool:
        return self.op == "get"

    def message(self) -> dict:
        msg: dict[str, Any] = {
            "messageType": f"{self.op.upper()}_REQUEST",
            "target": self.target,
            "blocking": self.blocking,
            "all": self.all,
        }
        if self.op == "put":
            msg["tuple"] = encode_tuple(self.fields)
        else:
            msg["template"] = [encode_field(f) for f in self.fields]
        if self.session is not None:
            msg["clientSession"] = self.session
        return msg


def _session(msg: dict) -> str | None:
    s = msg.get("clientSession")
    if s is None:
        return None
    if isinstance(s, bool) or not isinstance(s, str | int | float):
        raise BadRequest(f"clientSession must be a string, got {s!r}")
    return str(int(s)) if isinstance(s, float) and s.is_integer() else str(s)


def parse_json_line(line: bytes | str) -> Any:
    try:
        return json.loads(line)
    except (ValueError, UnicodeDecodeError) as exc:
        raise BadRequest(f"not JSON: {exc}") from None


def parse_request(line: bytes | str) -> Request:
    """Decode one request line; :class:`BadRequest` (with the session if readable) otherwise."""
    msg = parse_json_line(line)
    if not isinstance(msg, dict):
        raise BadRequest("a request is a JSON object")
    session = _session(msg)
    kind = msg.get("messageType")
    if kind not in REQUEST_TYPES:
        hint = (
            " (this server speaks jSpace's protocol: messageType, not action)"
            if "action" in msg
            else ""
        )
        raise BadRequest(f"unknown messageType {kind!r}{hint}", session)
    target = msg.get("target")
    if not isinstance(target, str):
        raise BadRequest(f"target must be a space name, got {target!r}", session)
    flags = {}
    for name in ("blocking", "all"):
        flag = msg.get(name, False)
        if not isinstance(flag, bool):
            raise BadRequest(f"{name} must be true or false, got {flag!r}", session)
        flags[name] = flag
    op = kind.split("_")[0].lower()
    try:
        if op == "put":
            fields = decode_tuple(msg.get("tuple"))
        else:
            fields = decode_template(msg.get("template"))
    except SpaceTypeError as exc:
        raise BadRequest(str(exc), session) from None
    return Request(op, target, fields, flags["blocking"], flags["all"], session)


def _answer(
    kind: str, ok: bool, session: str | None, code: str | None = None, **extra: Any
) -> dict:
    code, text = ("200", "OK") if ok else (code or "400", _STATUS[code or "400"])
    msg: dict[str, Any] = {
        "messageType": kind,
        "status": ok,
        "statusCode": code,
        "statusMessage": text,
    }
    msg.update(extra)
    if session is not None:
        msg["clientSession"] = session
    return msg


_STATUS = {"400": "Bad Request", "500": "Internal Server Error"}


def internal_error() -> dict:
    """``FAILURE``/500: the server failed on a request it understood."""
    return _answer("FAILURE", False, None, "500")


def put_response(ok: bool, session: str | None) -> dict:
    return _answer("PUT_RESPONSE", ok, session)


def get_response(tuples: list[tuple], session: str | None) -> dict:
    return _answer("GET_RESPONSE", True, session, tuples=[encode_tuple(t) for t in tuples])


def failure(session: str | None, reason: str | None = None) -> dict:
    """``FAILURE``/400; ``reason`` (a feds addition, ignored by jSpace clients) says why."""
    return _answer("FAILURE", False, session, **({"reason": reason} if reason else {}))


@dataclass(frozen=True, slots=True)
class Response:
    """A decoded answer, as a client sees it."""

    kind: str
    ok: bool
    code: str
    message: str
    tuples: list[tuple]
    session: str | None
    reason: str | None = None


def parse_response(line: bytes | str) -> Response:
    msg = parse_json_line(line)
    if not isinstance(msg, dict) or not isinstance(msg.get("messageType"), str):
        raise BadRequest(f"not a pSpaces answer: {msg!r}")
    try:
        tuples = [decode_tuple(t) for t in msg.get("tuples") or []]
    except SpaceTypeError as exc:
        raise BadRequest(f"bad tuple in answer: {exc}") from None
    session = msg.get("clientSession")
    return Response(
        msg["messageType"],
        msg.get("status") is True,
        str(msg.get("statusCode")),
        str(msg.get("statusMessage")),
        tuples,
        None if session is None else str(session),
        msg.get("reason"),
    )


def encode_line(msg: dict) -> bytes:
    return (json.dumps(msg, ensure_ascii=False, separators=(",", ":")) + "\n").encode()


class LineBuffer:
    """Splits received bytes into lines (``\\n`` or ``\\r\\n``), refusing lines over ``limit``."""

    def __init__(self, limit: int = MAX_LINE) -> None:
        self._buf = bytearray()
        self._limit = limit

    def feed(self, data: bytes) -> list[bytes]:
        self._buf += data
        lines = []
        while True:
            end = self._buf.find(b"\n")
            if end < 0:
                break
            line = bytes(self._buf[:end]).rstrip(b"\r")
            del self._buf[: end + 1]
            lines.append(line)
        if len(self._buf) > self._limit:
            raise BadRequest(f"a line longer than {self._limit} bytes")
        return lines
