"""pSpaces templates: a tuple of actual values and formal fields, matched as jSpace does.

A template matches a tuple of the same arity whose every field matches: an actual field by Java
``equals`` (:func:`feds.spaces.jtypes.same`, typed), a :class:`Formal` field by type
(``Class.isInstance``): ``Formal(int)`` admits Java ints only, :data:`ANY` admits everything and
:data:`NUMBER` any numeric value.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from feds.spaces import jtypes
from feds.spaces.jtypes import NUMBER, NUMERIC, OBJECT, SpaceTypeError

_PYTHON_TYPE_URIS = {
    bool: jtypes.BOOLEAN,
    int: jtypes.INT,
    float: jtypes.DOUBLE,
    str: jtypes.STRING,
    tuple: jtypes.TUPLE,
    jtypes.Long: jtypes.LONG,
    jtypes.Float: jtypes.FLOAT,
    jtypes.Char: jtypes.CHAR,
    jtypes.Byte: jtypes.BYTE,
    object: OBJECT,
}

_CLASS_NAME = re.compile(r"[A-Za-z_$][\w$]*(\.[A-Za-z_$][\w$]*)+")


def type_name(kind: type | str) -> str:
    """The type URI for a formal field: a Python type (``int``, ``Long``, ``object``...) or a URI.

    URIs are ``pspace:...`` names, ``java.lang.Object``, ``java.lang.Number``, or a dotted Java
    class name (``java.lang.Integer`` means ``pspace:int``); anything else is a
    :class:`SpaceTypeError`.
    """
    if isinstance(kind, type):
        uri = _PYTHON_TYPE_URIS.get(kind)
        if uri is None:
            raise SpaceTypeError(f"no pSpaces type for the Python type {kind.__name__}")
        return uri
    if not isinstance(kind, str):
        raise SpaceTypeError(f"a formal field takes a type or a type URI, got {kind!r}")
    if kind in jtypes.PSPACE_TYPES or kind in (OBJECT, NUMBER):
        return kind
    if kind in jtypes.JAVA_NAMES:
        return jtypes.JAVA_NAMES[kind]
    if kind.startswith("pspace:") or not _CLASS_NAME.fullmatch(kind):
        raise SpaceTypeError(f"unknown type URI {kind!r}")
    return kind


@dataclass(frozen=True, slots=True, init=False)
class Formal:
    """A formal field: any value of its type (``Formal(int)``, ``Formal("pspace:long")``)."""

    uri: str

    def __init__(self, kind: type | str) -> None:
        object.__setattr__(self, "uri", type_name(kind))

    def admits(self, value: Any) -> bool:
        uri = self.uri
        if uri == OBJECT:
            return True
        actual = jtypes.type_uri(value)
        return actual == uri or (uri == NUMBER and actual in NUMERIC)


ANY = Formal(OBJECT)
"""A formal field that matches every value (jSpace ``new FormalField(Object.class)``)."""
NUMBER_FIELD = Formal(NUMBER)
"""A formal field that matches every number (jSpace ``new FormalField(Number.class)``)."""


def check_template(fields: Sequence[Any]) -> tuple:
    """``fields`` as a template tuple, after checking each actual field is a typed value."""
    for f in fields:
        if f.__class__ is not Formal:
            jtypes.check_tuple((f,))
    return tuple(fields)


def matches(template: tuple, fields: tuple) -> bool:
    """Whether the tuple ``fields`` matches ``template`` (same arity, every field matches)."""
    if len(template) != len(fields):
        return False
    for t, v in zip(template, fields, strict=True):
        if t.__class__ is Formal:
            if not t.admits(v):
                return False
        elif not jtypes.same(t, v):
            return False
    return True
