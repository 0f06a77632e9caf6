"""A short text form of tuple fields and template fields, for the command line.

======================  =============================================
text                    field
======================  =============================================
``42``, ``-1``          ``int`` (Java int)
``7L``                  ``Long(7)``
``3.5``, ``1e3``        ``float`` (Java double)
``2.5f``                ``Float(2.5)``
``true``, ``false``     ``bool``
``'c'``                 ``Char("c")``
``"text"``              ``str`` (JSON string syntax)
``text``                ``str`` (anything else, as it is)
``?int`` ... ``?any``   a formal field: ``?int ?long ?double ?float ?boolean ?char ?byte
                        ?string ?tuple ?any ?number``
======================  =============================================

:func:`format_field` writes the same forms (strings always quoted), so output can be pasted back.
"""

from __future__ import annotations

import json
import re
from typing import Any

from feds.spaces.jtypes import Char, Float, Long, SpaceTypeError
from feds.spaces.templates import ANY, NUMBER_FIELD, Formal

_INT = re.compile(r"-?\d+")
_FLOAT = re.compile(r"-?(\d+\.\d*|\.\d+|\d+)([eE][-+]?\d+)?")
_SPECIAL = {"?any": ANY, "?number": NUMBER_FIELD}


def parse_field(text: str) -> Any:
    """One field from its text form; :class:`SpaceTypeError` for an unknown formal type."""
    if text.startswith("?"):
        if text in _SPECIAL:
            return _SPECIAL[text]
        return Formal(f"pspace:{text[1:]}")
    if text in ("true", "false"):
        return text == "true"
    if _INT.fullmatch(text):
        return int(text)
    if text.endswith("L") and _INT.fullmatch(text[:-1]):
        return Long(int(text[:-1]))
    if text.endswith("f") and _FLOAT.fullmatch(text[:-1]):
        return Float(float(text[:-1]))
    if _FLOAT.fullmatch(text):
        return float(text)
    if len(text) == 3 and text[0] == text[2] == "'":
        return Char(text[1])
    if text.startswith('"'):
        try:
            value = json.loads(text)
        except ValueError:
            raise SpaceTypeError(f"bad string {text!r} (JSON string syntax)") from None
        if isinstance(value, str):
            return value
    return text


def format_field(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float | str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, Long):
        return f"{value.value}L"
    if isinstance(value, Float):
        return f"{value.value!r}f"
    if isinstance(value, Char):
        return f"'{value.value}'"
    if isinstance(value, tuple):
        return "(" + " ".join(format_field(v) for v in value) + ")"
    return repr(value)


def format_tuple(fields: tuple) -> str:
    return " ".join(format_field(v) for v in fields)
