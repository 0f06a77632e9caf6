"""Java's typed values as pSpaces tuples carry them: an int is not a long, a bool is not an int.

A tuple field is one of

* ``bool`` (``pspace:boolean``), ``int`` (``pspace:int``, Java ``Integer``), ``float``
  (``pspace:double``), ``str`` (``pspace:string``), ``tuple`` (``pspace:tuple``, a nested tuple);
* a wrapper for the Java types Python has no class for: :class:`Long`, :class:`Float`,
  :class:`Char`, :class:`Byte`;
* :class:`JavaObject`: any other Java class, kept as its class name and its JSON form.

:func:`type_uri` names a field's type, and :func:`same` is Java's ``equals``: the types must be the
same and so must the values (``1``, ``Long(1)``, ``1.0`` and ``True`` are four different values).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any, TypeAlias

INT_MIN, INT_MAX = -(2**31), 2**31 - 1
LONG_MIN, LONG_MAX = -(2**63), 2**63 - 1


class SpaceTypeError(TypeError):
    """A value that cannot be a tuple field, or a type name pSpaces does not know."""


def _integral(value: Any, lo: int, hi: int, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise SpaceTypeError(f"{what} needs an integer, got {value!r}")
    if isinstance(value, float):
        if not value.is_integer():
            raise SpaceTypeError(f"{what} needs an integer, got {value!r}")
        value = int(value)
    if not lo <= value <= hi:
        raise SpaceTypeError(f"{value} is out of the range of a Java {what} [{lo}, {hi}]")
    return value


@dataclass(frozen=True, slots=True)
class Long:
    """A Java ``long`` (``pspace:long``): a 64-bit integer."""

    value: int

    def __post_init__(self) -> None:
        object.__setattr__(self, "value", _integral(self.value, LONG_MIN, LONG_MAX, "long"))


@dataclass(frozen=True, slots=True)
class Byte:
    """A Java ``byte`` (``pspace:byte``): an integer in [-128, 127]."""

    value: int

    def __post_init__(self) -> None:
        object.__setattr__(self, "value", _integral(self.value, -128, 127, "byte"))


@dataclass(frozen=True, slots=True)
class Float:
    """A Java ``float`` (``pspace:float``), kept as the number the wire carries."""

    value: float

    def __post_init__(self) -> None:
        if isinstance(self.value, bool) or not isinstance(self.value, int | float):
            raise SpaceTypeError(f"float needs a number, got {self.value!r}")
        object.__setattr__(self, "value", float(self.value))


@dataclass(frozen=True, slots=True)
class Char:
    """A Java ``char`` (``pspace:char``): a string of one character."""

    value: str

    def __post_init__(self) -> None:
        if not isinstance(self.value, str) or len(self.value) != 1:
            raise SpaceTypeError(f"char needs a 1-character string, got {self.value!r}")


@dataclass(frozen=True, slots=True)
class JavaObject:
    """A value of any other Java class: its class name and its JSON text (compared as JSON)."""

    class_name: str
    json_text: str

    @classmethod
    def of(cls, class_name: str, value: Any) -> JavaObject:
        return cls(class_name, json.dumps(value, sort_keys=True, separators=(",", ":")))

    @property
    def value(self) -> Any:
        return json.loads(self.json_text)


Field: TypeAlias = "bool | int | float | str | tuple | Long | Float | Char | Byte | JavaObject"

BOOLEAN, INT, LONG, DOUBLE, FLOAT = (
    "pspace:boolean",
    "pspace:int",
    "pspace:long",
    "pspace:double",
    "pspace:float",
)
CHAR, BYTE, STRING, TUPLE = "pspace:char", "pspace:byte", "pspace:string", "pspace:tuple"
OBJECT, NUMBER = "java.lang.Object", "java.lang.Number"

NUMERIC = frozenset({INT, LONG, DOUBLE, FLOAT, BYTE, "java.lang.Short"})
"""The type URIs that ``java.lang.Number`` admits."""

_PYTHON_TYPES: dict[type, str] = {
    bool: BOOLEAN,
    int: INT,
    float: DOUBLE,
    str: STRING,
    tuple: TUPLE,
    Long: LONG,
    Float: FLOAT,
    Char: CHAR,
    Byte: BYTE,
}

PSPACE_TYPES = frozenset(_PYTHON_TYPES.values())

JAVA_NAMES: dict[str, str] = {
    "java.lang.Boolean": BOOLEAN,
    "java.lang.Integer": INT,
    "java.lang.Long": LONG,
    "java.lang.Double": DOUBLE,
    "java.lang.Float": FLOAT,
    "java.lang.Character": CHAR,
    "java.lang.Byte": BYTE,
    "java.lang.String": STRING,
    "org.jspace.Tuple": TUPLE,
}
"""Java class names that mean a pSpaces type (a jSpace ``FormalField(Integer.class)`` and so on)."""


def type_uri(value: Any) -> str:
    """The pSpaces type URI of a tuple field; raises :class:`SpaceTypeError` for anything else."""
    uri = _PYTHON_TYPES.get(value.__class__)
    if uri is not None:
        return uri
    if value.__class__ is JavaObject:
        return value.class_name
    raise SpaceTypeError(
        f"{value!r} ({type(value).__name__}) cannot be a tuple field: use bool, int, float, str, "
        "tuple, Long, Float, Char, Byte or JavaObject"
    )


def check_tuple(fields: tuple) -> tuple:
    """``fields`` as a tuple, after checking that every field (nested too) is a typed value."""
    for value in fields:
        type_uri(value)
        if value.__class__ is int:
            _integral(value, INT_MIN, INT_MAX, "int (use Long for larger numbers)")
        elif value.__class__ is tuple:
            check_tuple(value)
    return tuple(fields)


def _same_double(a: float, b: float) -> bool:
    # Java Double.equals compares bit patterns: NaN equals NaN, 0.0 differs from -0.0.
    if a != a:
        return b != b
    return a == b and math.copysign(1.0, a) == math.copysign(1.0, b)


def same(a: Any, b: Any) -> bool:
    """Java ``equals`` on tuple fields: the same type and the same value."""
    cls = a.__class__
    if cls is not b.__class__:
        return False
    if cls is float:
        return _same_double(a, b)
    if cls is Float:
        return _same_double(a.value, b.value)
    if cls is tuple:
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    return a == b
