"""Witnesses: a payload that keeps a list of what code looked at in it, and the selector that
finds the payloads in which it would see the same.

A :class:`Witness` stands for a real value (a message's payload, or a part of one) and answers
every question about it truthfully: its class, a record's label and fields, a sequence's
length and items, a comparison, a hash. Each answer is noted as a *guard* on the part's path:

* the class (``x.__class__``, ``isinstance``);
* a record's label (``x.label``): the very symbol, or an exactly equal label;
* a record's arity or a sequence's length (``x.fields``, ``len(x)``, ``x[i]``, iteration),
  whose parts are handed out as witnesses of their own, so what is done with them is noted too;
* the exact value (anything else: ``==``, ``hash``, ``<``, truth, text, arithmetic).

Code that sees a witness in place of a value, and looks at values only in those ways (never by
identity, nor with ``type()``), does the same for every value that passes the same guards: it
asked the same questions and got the same answers. The one value whose answers depend on
identity, a NaN (equal to itself only as the same object), cannot be witnessed: asking for the
exact value of a part that holds one raises :class:`Unfaithful`.

:func:`selector` compiles the guards, with *templates* of what the code sent on (a part of the
payload, a sequence or a record of parts, a constant), into one function: given another
payload, it returns what the code would send for it, or None where a guard fails.
:mod:`feds.routes` runs a node's steps on a witness to find a message's route.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from feds.codegen import factory
from feds.values import FrozenDict, Record, Symbol, Value, exact_key

__all__ = [
    "CLASS",
    "LABEL",
    "LENGTH",
    "VALUE",
    "Template",
    "Trace",
    "Unfaithful",
    "Witness",
    "selector",
    "template",
]

CLASS, LABEL, LENGTH, VALUE = "class", "label", "length", "value"
"""The kinds of guard (see the module docstring)."""

Path = tuple[int, ...]
Template = tuple
"""What code sent, in terms of the payload: ``("part", path)``, ``("tuple", templates)``,
``("record", label, templates)`` or ``("const", value)``."""

_SEQUENCES: Final = (tuple, Record)


class Unfaithful(BaseException):
    """Code asked for the exact value of a part that holds a NaN: a NaN equals itself only as
    the same object (``values.NAN``; a tuple compares items by identity first), which no
    witness can be, so nothing noted about such a payload can be trusted. A BaseException, so
    that no ``except Exception`` in the code takes it for an error of its own."""


class Trace:
    """The guards noted while code looked at the witnesses of one payload, in order."""

    __slots__ = ("classes", "guards")

    def __init__(self) -> None:
        self.guards: dict[tuple[Path, str], Value] = {}
        self.classes: dict[Path, type] = {}

    def note(self, path: Path, kind: str, datum: Value) -> None:
        key = (path, kind)
        if key not in self.guards:
            self.guards[key] = datum
            if kind == CLASS:
                self.classes[path] = datum  # type: ignore[assignment]


def _get(w: Witness, name: str) -> Any:
    return object.__getattribute__(w, name)


class Witness:
    """A value that notes what is looked at in it (see the module docstring)."""

    __slots__ = ("_kids", "_path", "_trace", "_value")

    def __init__(self, value: Value, trace: Trace, path: Path = ()) -> None:
        object.__setattr__(self, "_value", value)
        object.__setattr__(self, "_trace", trace)
        object.__setattr__(self, "_path", path)
        object.__setattr__(self, "_kids", None)

    def __getattribute__(self, name: str) -> Any:
        value = _get(self, "_value")
        trace = _get(self, "_trace")
        path = _get(self, "_path")
        cls = value.__class__
        if name == "__class__":
            trace.note(path, CLASS, cls)
            return cls
        if cls is Record and name in ("label", "fields"):
            trace.note(path, CLASS, cls)
            if name == "fields":
                return _parts(self)
            label = value.label
            trace.note(path, LABEL, label)
            return label
        _pin(self)
        return getattr(value, name)

    def __len__(self) -> int:
        if _get(self, "_value").__class__ in _SEQUENCES:
            return len(_parts(self))
        return len(_pin(self))  # type: ignore[arg-type]

    def __getitem__(self, key: Any) -> Any:
        if _get(self, "_value").__class__ in _SEQUENCES:
            return _parts(self)[key]
        return _pin(self)[key]  # type: ignore[index]

    def __iter__(self) -> Any:
        if _get(self, "_value").__class__ in _SEQUENCES:
            return iter(_parts(self))
        return iter(_pin(self))  # type: ignore[call-overload]

    def __bool__(self) -> bool:
        if _get(self, "_value").__class__ is tuple:
            return bool(_parts(self))
        return bool(_pin(self))

    def __repr__(self) -> str:
        return f"<witness of {_pin(self)!r}>"

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"values are immutable: cannot set {name!r}")

    __delattr__ = __setattr__  # type: ignore[assignment]


def _parts(w: Witness) -> tuple:
    """The fields or items of the record or sequence ``w`` stands for, as witnesses (its class
    and length noted)."""
    kids = _get(w, "_kids")
    if kids is None:
        value, trace, path = _get(w, "_value"), _get(w, "_trace"), _get(w, "_path")
        items = value.fields if value.__class__ is Record else value
        trace.note(path, CLASS, value.__class__)
        trace.note(path, LENGTH, len(items))
        kids = tuple(Witness(x, trace, (*path, i)) for i, x in enumerate(items))
        object.__setattr__(w, "_kids", kids)
    return kids


def _pin(w: Witness) -> Value:
    """The value ``w`` stands for, its exact value noted (anything may be asked of it now);
    :class:`Unfaithful` if it holds a NaN."""
    value = _get(w, "_value")
    if _has_nan(value):
        raise Unfaithful
    _get(w, "_trace").note(_get(w, "_path"), VALUE, value)
    return value


def _has_nan(value: Any) -> bool:
    return _any_part(value, _is_nan)


def _is_nan(x: Any) -> bool:
    return type(x) is float and x != x


def _any_part(value: Any, test: Callable[[Any], bool]) -> bool:
    """Whether ``test`` holds for ``value`` or any item, field, label, key or value in it
    (walked with ``type()``, which a witness does not notice)."""
    cls = type(value)
    if cls is tuple or cls is frozenset:
        return any(_any_part(x, test) for x in value)
    if cls is Record:
        return _any_part(value.label, test) or any(_any_part(x, test) for x in value.fields)
    if cls is FrozenDict:
        return any(_any_part(k, test) or _any_part(v, test) for k, v in value.items())
    return test(value)


_BY_VALUE: Final = """
    __eq__ __ne__ __lt__ __le__ __gt__ __ge__ __hash__ __contains__ __call__ __index__ __int__
    __float__ __complex__ __round__ __trunc__ __floor__ __ceil__ __neg__ __pos__ __abs__
    __invert__ __add__ __radd__ __sub__ __rsub__ __mul__ __rmul__ __matmul__ __rmatmul__
    __truediv__ __rtruediv__ __floordiv__ __rfloordiv__ __mod__ __rmod__ __divmod__
    __rdivmod__ __pow__ __rpow__ __lshift__ __rlshift__ __rshift__ __rrshift__ __and__
    __rand__ __xor__ __rxor__ __or__ __ror__ __str__ __format__ __bytes__ __reversed__
    __reduce__ __reduce_ex__ __sizeof__ __dir__
"""
"""The operations that depend on a part's exact value: the part is pinned to it."""


def _by_value(name: str) -> Callable[..., Any]:
    def operation(self: Witness, *args: Any) -> Any:
        return getattr(_pin(self), name)(*args)

    operation.__name__ = name
    return operation


for _name in _BY_VALUE.split():
    setattr(Witness, _name, _by_value(_name))


def template(value: Any) -> Template | None:
    """What ``value``, which code sent on, is in terms of the payload, or None if it holds a
    witness the template cannot say how to rebuild (only parts, tuples and records of them)."""
    cls = type(value)  # type() does not alert a witness
    if cls is Witness:
        return ("part", _get(value, "_path"))
    if cls is tuple:
        items = [template(x) for x in value]
        if None in items:
            return None
        if all(t[0] == "const" for t in items):  # type: ignore[index]
            return ("const", value)
        return ("tuple", tuple(items))
    if cls is Record:
        items = [template(x) for x in (value.label, *value.fields)]
        if None in items:
            return None
        if all(t[0] == "const" for t in items):  # type: ignore[index]
            return ("const", value)
        return ("record", items[0], tuple(items[1:]))
    if _holds_witness(value):
        return None
    return ("const", value)


def _holds_witness(value: Any) -> bool:
    """Whether ``value`` (a set, a dict, or anything in them) has a witness in it."""
    return _any_part(value, _is_witness)


def _is_witness(x: Any) -> bool:
    return type(x) is Witness


class _Source:
    """Collects the parameters and lines of one generated selector."""

    def __init__(self, classes: dict[Path, type]) -> None:
        self.params: dict[str, Any] = {"KEY": exact_key, "Record": Record, "Symbol": Symbol}
        self.classes = classes
        self.lines: list[str] = []

    def bind(self, value: Any) -> str:
        name = f"K{len(self.params)}"
        self.params[name] = value
        return name

    def expr(self, path: Path) -> str:
        """An expression projecting ``path`` out of ``p`` (each prefix's class is guarded)."""
        out = "p"
        for j, step in enumerate(path):
            out += f".fields[{step}]" if self.classes[path[:j]] is Record else f"[{step}]"
        return out

    def guard(self, path: Path, kind: str, datum: Value) -> None:
        e = self.expr(path)
        if kind == CLASS:
            test = f"{e}.__class__ is not {self.bind(datum)}"
        elif kind == LABEL:
            if datum.__class__ is Symbol:  # interned: equal symbols are the same object
                test = f"{e}.label is not {self.bind(datum)}"
            else:
                test = f"KEY({e}.label) != {self.bind(exact_key(datum))}"
        elif kind == LENGTH:
            fields = ".fields" if self.classes[path] is Record else ""
            test = f"len({e}{fields}) != {datum}"
        else:
            cls = self.bind(datum.__class__)
            test = f"{e}.__class__ is not {cls} or KEY({e}) != {self.bind(exact_key(datum))}"
        self.lines.append(f"    if {test}:")
        self.lines.append("        return None")

    def build(self, t: Template) -> str:
        kind = t[0]
        if kind == "part":
            return self.expr(t[1])
        if kind == "const":
            return self.bind(t[1])
        if kind == "tuple":
            return "(" + "".join(self.build(x) + ", " for x in t[1]) + ")"
        fields = "(" + "".join(self.build(x) + ", " for x in t[2]) + ")"
        return f"Record({self.build(t[1])}, {fields})"


def selector(trace: Trace, templates: list[Template]) -> Callable[[Value], tuple | None]:
    """A function of a payload: the values ``templates`` make of it (a tuple, one per
    template), or None if it fails a guard of ``trace``."""
    source = _Source(trace.classes)
    for (path, kind), datum in trace.guards.items():
        source.guard(path, kind, datum)
    made = "(" + "".join(source.build(t) + ", " for t in templates) + ")"
    text = "\n".join(
        [
            f"def make({', '.join(source.params)}):",
            "  def select(p):",
            *source.lines,
            f"    return {made}",
            "  return select",
        ]
    )
    return factory(text, "<feds.witness selector>")(**source.params)
