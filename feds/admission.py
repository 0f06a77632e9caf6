"""What a node admits from its applications: no Observe that would break it or feed it itself.

Local access (:class:`feds.node.LocalAccess`) wraps what applications assert in the protocol's
envelope and asserts it in the fragment, where the protocol acts on every
``<Observe pattern observer>`` it finds: it publishes each match of ``pattern`` to
``observer``, from the node's own actor. Applications (clients over the wire above all) are not
trusted, so local access checks each Observe at the door and refuses two kinds:

* an observer that is not a reference: ``<Observe <_> 5>`` would have the node publish to
  ``5``, which fails in the node's actor, every time the pattern matches;
* an observer that is one of the node's own entities (its local access, fragment or service):
  the node would assert each match to itself, where it is wrapped and matched again, so
  ``<Observe $x access>`` asserts ``[x]``, ``[[x]]``, ... without end. A plain Syndicate
  dataspace lets an observer route back into it, and the loop is only harmless if it
  converges; a node serving many clients cannot tell a converging loop from a runaway one, so
  it refuses every observer inside it.

A refused assertion is logged (a warning naming the node and the reason) and goes no further:
the application's handle stays valid and retracting it does nothing. Records labelled
``Observe`` that do not have two fields, and Observe messages, are plain data to every protocol
and pass; so does an Observe with an invalid pattern, which the fragment keeps as a plain
assertion (:mod:`feds.dataspace`).
"""

from __future__ import annotations

from feds.actor import Actor, Ref
from feds.dataspace import OBSERVE
from feds.values import Record, Value


def refusal(node_actor: Actor, value: Value) -> str | None:
    """Why local access of the node living in ``node_actor`` refuses to assert ``value``, or
    None if it admits it."""
    if value.__class__ is not Record or value.label is not OBSERVE or len(value.fields) != 2:
        return None
    observer = value.fields[1]
    if observer.__class__ is not Ref:
        return f"an Observe whose observer is not a reference: {_show(observer)}"
    if observer.actor is node_actor:
        return "an Observe whose observer is the node's own entity (it would feed itself)"
    return None


def _show(v: Value) -> str:
    text = repr(v)
    return text if len(text) <= 80 else text[:77] + "..."
