"""Python code generated at run time and compiled once per distinct text.

The skeleton index (:mod:`feds.index`) generates its walkers, and message routes
(:mod:`feds.witness`) their selectors, as source text that depends only on a structure
(paths, guards), never on data: the data are passed in as the parameters of a ``make``
function the text defines. A text is compiled once and its ``make`` kept, so structures that
recur cost a call of ``make``, not a compilation.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

__all__ = ["factory"]

_FACTORIES: dict[tuple[str, str], Callable[..., Any]] = {}
_FACTORIES_MAX: Final = 4096
"""Compiled texts kept; the oldest goes when a new one would exceed this."""


def factory(source: str, name: str) -> Callable[..., Any]:
    """The ``make(**params)`` function that ``source`` defines, compiled (as ``name``, which
    tracebacks show) the first time this text is asked for."""
    key = (source, name)
    make = _FACTORIES.get(key)
    if make is None:
        namespace: dict[str, Any] = {}
        exec(compile(source, name, "exec"), namespace)
        if len(_FACTORIES) >= _FACTORIES_MAX:
            del _FACTORIES[next(iter(_FACTORIES))]
        make = _FACTORIES[key] = namespace["make"]
    return make
