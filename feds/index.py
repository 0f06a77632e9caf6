"""The skeleton index of a dataspace: every assertion and every handler, matched incrementally.

This follows Garnock-Jones, *Efficient, Imperative Dataspaces for Conversational Concurrency*
(2018/2019), section "The index". The structures are the paper's::

    Index        = Bag(V) x Node
    Node         = Continuation x (Selector -> Class -> Node)
    Continuation = cache set x (constPaths -> constValues -> Leaf)
    Leaf         = cache set x (handler key -> Handler)
    Handler      = Bag(captures) x set(callbacks)

with one extension for the constraints of ``protocols/patterns.md``: a Leaf's handler table is
keyed by ``(capture_paths, checks)`` and a Handler only counts the assertions of its leaf that
pass its checks (checked on addition *and* removal, so the counts stay consistent).

Representation choices (all equivalent to the paper's, chosen for speed in CPython):

* **Selectors are absolute paths (a precomputed path walk).** Instead of the paper's
  ``(pop-count, index)`` selectors, which move a stack of sub-values during the walk, each edge
  is keyed by the absolute path of the position whose class it tests and projects it straight
  from the whole value. The two are interchangeable (a ``(pop, index)`` pair at a given trie
  position denotes exactly one absolute path), but the absolute form needs no stack: a
  projection like ``v.fields[1][0]`` is a few C-level steps, with no list pushes or pops.
* **Type-exact keys.** Equality of values is type-exact (``1``, ``1.0`` and ``True`` differ; see
  :mod:`feds.values`), Python's is not, so every table keyed by values is keyed by
  :func:`~feds.values.exact_key`: the bag (a record is its own key, anything else costs one
  call), the captures bags of handlers that keep one, and record labels in classes. The const
  tables are keyed by :func:`~feds.values.probe_key`, which wraps integers too and whose
  wrappers equal the raw value: a raw constant finds exactly its own leaf, so a retraction and
  a message look up the raw constant (no cost), and only an assertion, which may insert a key,
  converts a constant that is not a string, symbol, reference... (one set membership test).
* **The bag and the canonical copy.** The bag maps each asserted value's key to its *canonical*
  copy (the object first asserted); counts above one live in a side table. Every cache holds the
  canonical object keyed by its ``id`` (an int hashes in C, a Record hashes in Python), and a
  removal walks with the canonical object, so the leaf caches (keyed by ``id``) find it, and a
  check sees the very objects on removal that it saw on addition.
* **Caches are not duplicated.** The root continuation's cache *is* the bag, and a node with a
  const table keeps no cache of its own: every value of the node is in exactly one leaf of each
  table, so the leaves of any table are the cache (rebuilt as a dict if the last table goes).
* **Complete handlers keep no bag.** When a handler's captures, constants and shape together
  cover every position of the value (no discard, no dict), distinct assertions of its leaf
  have distinct captures, so its Bag(captures) would hold exactly the captures of the leaf's
  cached values that pass its checks, each once: it is left implicit, and the walker fires
  the callbacks without a bag lookup (:func:`_complete`, :meth:`Handler.present`).
* **Leaves come in three forms.** A leaf without handlers caching one value is that value
  itself (no allocation in the common one-assertion-per-constant case), one caching several is
  a plain ``dict``, and a leaf with handlers is a :class:`Leaf` (a ``dict`` subclass carrying
  the handler table; it always has at least one handler). A Leaf keeps one cached value in a
  slot and only the others in its dict, so a matching assertion costs no cache dict operation.
* **Generated walkers.** ``modify`` is specialised to the structure: each owner node gets add,
  remove and message functions generated with ``compile()`` from its const tables and edges, a
  child reached through a single-class edge is inlined into its parent's function, and the
  root's functions include the bag update and serve as the index's entry points. In a leaf, the
  handler with the const table's first handler key is inlined too; other handlers run through
  functions generated per handler key. The source depends only on the *structure* (paths,
  class kinds), is cached by its text, and never contains data: constants (dict keys, label
  names, tables) are passed in as closure variables. Code is regenerated only when the
  structure changes (a node, edge or const table appears or goes), not when handlers with new
  constants come and go.

Pruning: the paper never removes shapes. Here, a const table is dropped as soon as it holds no
handler (its handler-less leaves would cost every assertion a cache write for nothing), and a
node left with no const table and no edge is removed from its parent, recursively, so a
dataspace whose observers come and go does not accumulate structure; :meth:`Index.is_empty`
checks that nothing is left. The price: the first observer of a shape after a quiet spell
rebuilds that node's cache and table from the assertions held (the paper's ``extend`` cost).

Events: a callback is ``callback(event, captures, key)`` with ``event`` one of ``"+"`` (a
captures vector became present), ``"-"`` (it went away) and ``"!"`` (a message matched). For
``"+"`` and ``"-"``, ``key`` is the captures' :func:`~feds.values.exact_key` or None: the index
works it out inline when it is the captures themselves (their items plain, the usual case),
and a callback keeping a table per captures vector uses it as it is, or ``exact_key(captures)``
when it is None; for ``"!"`` it is None. Callbacks must not modify the index while
it is dispatching (queue the work instead) and must not raise.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from feds.codegen import factory
from feds.patterns import Check, Path, Skeleton
from feds.values import (
    EXACT_LOOKUP_CLASSES,
    SELF_KEY_CLASSES,
    FrozenDict,
    Record,
    Symbol,
    Value,
    exact_key,
    key_value,
    probe_key,
)

Callback = Callable[[str, tuple, Value], Any]

__all__ = ["MISSING", "Callback", "Index"]


class _Missing:
    __slots__ = ()

    def __repr__(self) -> str:
        return "MISSING"


MISSING: Any = _Missing()
"""What projecting an absent dict key yields; never equal to any value."""


def _find(d: FrozenDict, key: Value) -> Value:
    """The value of ``d`` under ``key`` (type-exactly), or MISSING."""
    return d.get(key, MISSING)


# --------------------------------------------------------------------------------------------
# Structures


class Handler(dict):
    """A handler: the dict itself is its Bag of captures vectors (``captures -> count``).

    A *complete* handler (see :func:`_complete`) keeps its dict empty: its bag is implicit,
    the captures of the values in its leaf's cache that pass its checks, each with count 1.

    ``callbacks`` is an ordered set; ``cbs`` is the snapshot the generated code iterates, so a
    callback list changed during dispatch never disturbs the loop in progress.
    """

    __slots__ = ("callbacks", "cb", "cbs", "complete", "fns", "key")

    def setup(self, key: tuple, complete: bool) -> Handler:
        self.key = key
        self.complete = complete
        self.callbacks: dict[Callback, None] = {}
        self.cbs: tuple[Callback, ...] = ()
        self.cb: Callback | None = None  # the callback when there is exactly one
        # generated (add, remove, msg, test), each called as fn(handler, v); shared by all
        # handlers with this key in one const table
        self.fns: tuple = ()
        return self

    def set_callbacks(self) -> None:
        self.cbs = tuple(self.callbacks)
        self.cb = self.cbs[0] if len(self.cbs) == 1 else None

    def present(self, leaf: Leaf) -> list[tuple]:
        """The distinct captures vectors present (the bag's keys), given the handler's leaf."""
        if not self.complete:
            return list(map(key_value, self))
        test = self.fns[3]
        captures = [test(self, v) for v in leaf.cached()]
        return [c for c in captures if c is not None]


class Leaf(dict):
    """A leaf with handlers. Its cache is the slot ``one`` (a value, or ``MISSING``) plus the
    dict itself (``id -> value``) for any others, so the common leaf of one value costs no
    dict operation (and no ``id``) when the value comes and goes.

    ``h`` is the handler for the const table's *primary* handler key (the generated walker
    inlines its projection and bag update); handlers with other keys run through generated
    functions, listed as ``(function, handler)`` pairs in ``adds``/``removes``/``msgs``.
    ``cb`` is the common case made direct: when ``h`` is the leaf's only handler, is complete
    and has a single callback, ``cb`` is that callback (else None), and the walker calls it
    without visiting the Handler. :meth:`refresh` after any change of handlers or callbacks.
    """

    __slots__ = ("adds", "cb", "h", "handlers", "msgs", "one", "removes")

    def setup(self, cached: list[Value]) -> Leaf:
        self.one: Value = cached[0] if cached else MISSING
        if len(cached) > 1:
            self.update((id(v), v) for v in cached[1:])
        self.handlers: dict[tuple, Handler] = {}
        self.h: Handler | None = None
        self.cb: Callback | None = None
        self.adds: tuple = ()
        self.removes: tuple = ()
        self.msgs: tuple = ()
        return self

    def refresh(self, primary: tuple | None) -> None:
        h = self.h = self.handlers.get(primary)  # type: ignore[arg-type]
        if h is not None and len(self.handlers) == 1:  # the common leaf: just the primary
            self.cb = h.cb if h.complete else None
            self.adds = self.removes = self.msgs = ()
            return
        others = [x for key, x in self.handlers.items() if key != primary]
        self.cb = h.cb if h is not None and h.complete and not others else None
        self.adds = tuple((x.fns[0], x) for x in others)
        self.removes = tuple((x.fns[1], x) for x in others)
        self.msgs = tuple((x.fns[2], x) for x in others)

    def cached(self) -> list[Value]:
        """The values in the leaf's cache."""
        if self.one is MISSING:
            return list(self.values())
        return [self.one, *self.values()]


def _leaf_values(leaf: Any) -> list[Value]:
    """The cache of a leaf in any of its three forms (value, dict, Leaf)."""
    if leaf.__class__ is Leaf:
        return leaf.cached()
    if leaf.__class__ is dict:
        return list(leaf.values())
    return [leaf]


class ConstTable:
    """One entry of a Continuation's table: const paths -> const values -> Leaf.

    A leaf is held in one of three forms: a handler-less leaf caching a single value is that
    value itself (no allocation for the common one-assertion-per-constant case); a handler-less
    leaf caching several values is a plain ``dict`` (``id -> value``); a leaf with handlers is a
    :class:`Leaf`. ``primary`` is the handler key the generated walker inlines (the first one
    installed in this table).
    """

    __slots__ = ("complete", "fns", "handlers", "leaves", "paths", "primary")

    def __init__(self, paths: tuple[Path, ...]) -> None:
        self.paths = paths
        self.leaves: dict[Any, Any] = {}
        self.handlers = 0  # handlers in all leaves; the table goes when this drops to 0
        self.primary: tuple | None = None
        self.fns: dict[tuple, tuple] = {}  # handler key -> generated functions
        self.complete: dict[tuple, bool] = {}  # handler key -> whether its handlers are complete


class Continuation:
    """Cache of the values that reach a node, plus its const tables.

    ``cache`` is ``None`` where it would be redundant: at the root (the index's bag is that
    cache) and at a node with a const table (every value of the node is in exactly one leaf of
    each table, so the leaves of any table *are* the cache). It is rebuilt from the leaves when
    the last table goes and the node stays.
    """

    __slots__ = ("cache", "table")

    def __init__(self) -> None:
        self.cache: dict[int, Value] | None = {}
        self.table: dict[tuple[Path, ...], ConstTable] = {}


class Edge:
    """The paper's ``Selector -> Class -> Node`` entry, selector as an absolute path."""

    __slots__ = ("classes", "path", "project")

    def __init__(self, path: Path, project: Callable[[Value], Value]) -> None:
        self.path = path
        self.project = project
        self.classes: dict[tuple, Node] = {}


def _nothing(*args: Any) -> None:
    return None


class Node:
    """A trie node: a continuation, edges, and the walkers generated from both."""

    __slots__ = ("add", "cls", "cont", "edge", "edges", "kinds", "msg", "owner", "parent", "remove")

    def __init__(self, parent: Node | None, edge: Edge | None, cls: tuple | None, kinds: dict):
        self.cont = Continuation()
        self.edges: dict[Path, Edge] = {}
        self.parent = parent
        self.edge = edge
        self.cls = cls
        self.kinds = kinds  # path -> "rec" | "arr" | "dict" for every position pinned so far
        self.add: Callable[[Value], None] = _nothing
        self.remove: Callable[[Value], None] = _nothing
        self.msg: Callable[[Value], None] = _nothing
        # the node whose generated walkers contain this node's code (itself, or an ancestor
        # that inlines it); None until first generated
        self.owner: Node | None = None


def _classify(x: Any) -> tuple | None:
    """The paper's ``classof``, for the three kinds of groups (a label as its exact key)."""
    cls = x.__class__
    if cls is Record:
        return ("rec", exact_key(x.label), len(x.fields))
    if cls is tuple:
        return ("arr", len(x))
    if cls is FrozenDict:
        return ("dict",)
    return None


def _complete(skeleton: Skeleton) -> bool:
    """Whether the captures of a handler of ``skeleton`` determine the value within its leaf.

    They do when every position of the value is captured, constant, or a record or sequence
    (whose class the shape pins) with all its positions so covered. Two distinct (unequal)
    assertions of one leaf then never have equal captures, so the handler's bag only ever
    holds counts of 1 for exactly the captures of the leaf's cached values that pass its
    checks: the index does not store it (the paper's Bag(captures) is implicit in the leaf).
    """
    fixed = set(skeleton.const_paths) | set(skeleton.capture_paths)
    classes = dict(skeleton.shape)

    def covered(path: Path) -> bool:
        if path in fixed:
            return True
        cls = classes.get(path)
        if cls is None or cls[0] == "dict":
            return False
        return all(covered((*path, i)) for i in range(cls[-1]))

    return covered(())


def _const_key(values: tuple) -> Any:
    """Key of a const table's leaves: the probe key of the value for one path, else of the
    tuple (as the generated walkers compute it)."""
    return probe_key(values[0] if len(values) == 1 else values)


# --------------------------------------------------------------------------------------------
# Code generation


def _factory(source: str) -> Callable[..., Any]:
    """Compile (once per distinct source text) a ``make(**params)`` factory function."""
    return factory(source, "<feds.index generated>")


class _Gen:
    """Collects the closure parameters of one generated factory."""

    def __init__(self) -> None:
        self.params: dict[str, Any] = {
            "MISSING": MISSING,
            "KEY": exact_key,
            "SELF": SELF_KEY_CLASSES,
            "PKEY": probe_key,
            "SAFE": EXACT_LOOKUP_CLASSES,
            "FIND": _find,
        }

    def bind(self, prefix: str, value: Any) -> str:
        name = f"{prefix}{len(self.params)}"
        self.params[name] = value
        return name

    def path(self, path: Path, kinds: dict) -> str:
        """An expression projecting ``path`` out of ``v``.

        Every proper prefix of ``path`` is a position whose class the trie has already checked,
        so only the last step can meet an absent dict key (it yields ``MISSING``).
        """
        expr = "v"
        last = len(path) - 1
        for j, step in enumerate(path):
            kind = kinds.get(path[:j])
            if kind == "dict":  # the step is the key's exact key (see feds.patterns)
                k = key_value(step)
                key = self.bind("K", k)
                if k.__class__ in EXACT_LOOKUP_CLASSES:  # a plain dict lookup is type-exact
                    expr += f"._items.get({key}, MISSING)" if j == last else f"._items[{key}]"
                elif j == last:
                    expr = f"FIND({expr}, {key})"
                else:
                    expr += f"[{key}]"  # FrozenDict.__getitem__, type-exact
            elif kind is not None and step.__class__ is int and step >= 0:
                expr += f".fields[{step}]" if kind == "rec" else f"[{step}]"
            else:
                raise ValueError(f"skeleton path {path!r} is not inside the skeleton's shape")
        return expr

    def key(self, paths: tuple[Path, ...], kinds: dict) -> list[str]:
        """Statements setting ``key`` to the const-table key of ``v`` (see :func:`_const_key`):
        a constant of a plain class is its own key, found without a call."""
        exprs = [self.path(p, kinds) for p in paths]
        if len(exprs) == 1:
            return [f"key = {exprs[0]}", "if key.__class__ not in SAFE:", "    key = PKEY(key)"]
        lines = ["key = (" + "".join(e + ", " for e in exprs) + ")"]
        if exprs:  # the key of no constants is () itself
            tests = " or ".join(f"key[{i}].__class__ not in SAFE" for i in range(len(exprs)))
            lines += [f"if {tests}:", "    key = PKEY(key)"]
        return lines

    def probe(self, paths: tuple[Path, ...], kinds: dict) -> str:
        """The raw key of ``v`` for a lookup (not an insertion) in a const table: it finds its
        own leaf and no other (see :func:`~feds.values.probe_key`)."""
        exprs = [self.path(p, kinds) for p in paths]
        return exprs[0] if len(exprs) == 1 else "(" + "".join(e + ", " for e in exprs) + ")"

    def source(self, body: list[str]) -> str:
        return f"def make({', '.join(self.params)}):\n" + "".join(f"    {b}\n" for b in body)


def _indent(lines: list[str], n: int) -> list[str]:
    pad = " " * n
    return [pad + line for line in lines]


def _make_getter(path: Path, kinds: dict) -> Callable[[Value], Value]:
    g = _Gen()
    expr = g.path(path, kinds)
    return _factory(g.source(["def get(v):", f"    return {expr}", "return get"]))(**g.params)


def _make_key_getter(paths: tuple[Path, ...], kinds: dict) -> Callable[[Value], Any]:
    g = _Gen()
    body = _indent([*g.key(paths, kinds), "return key"], 4)
    return _factory(g.source(["def get(v):", *body, "return get"]))(**g.params)


def _checked(conds: list[str], body: list[str]) -> list[str]:
    """``body`` guarded by the residual checks ``conds`` (unguarded if there are none)."""
    if not conds:
        return body
    return [f"if {' and '.join(conds)}:", *_indent(body, 4)]


def _handler_parts(g: _Gen, key: tuple, kinds: dict) -> tuple[list[str], str, int]:
    """Check expressions, the captures-vector expression and the number of captures for a
    handler key."""
    capture_paths, checks = key
    conds = [f"{g.bind('C', check)}({g.path(path, kinds)})" for path, check in checks]
    caps = "(" + "".join(g.path(p, kinds) + ", " for p in capture_paths) + ")"
    return conds, caps, len(capture_paths)


def _captures_key(n: int, complete: bool) -> str:
    """The key handed over with ``c``, a captures vector of ``n`` items: ``c`` itself when each
    item is its own key (an item of a class that always is, tested inline without a call; a
    tuple, by one call). Otherwise (a float or a boolean in it, or an item rarely captured),
    a handler with a bag keys it by :func:`~feds.values.exact_key`, and a complete one hands
    over None: a callback needing the key works it out, and the index allocates no wrapper
    that no one may use."""
    if n == 0:
        return "c"
    own = " and ".join(
        f"(c[{i}].__class__ in SELF or c[{i}].__class__ is tuple and KEY(c[{i}]) is c[{i}])"
        for i in range(n)
    )
    return f"c if {own} else {'None' if complete else 'KEY(c)'}"


def _fire(h: str, event: str, key: str) -> list[str]:
    """Call the callbacks of handler ``h`` with ``(event, c, key)``; one callback is called
    directly."""
    return [
        f"f = {h}.cb",
        "if f is not None:",
        f"    f('{event}', c, {key})",
        "else:",
        f"    for f in {h}.cbs:",
        f"        f('{event}', c, {key})",
    ]


def _bag_add(h: str, caps: str, n: int, complete: bool) -> list[str]:
    key = _captures_key(n, complete)
    if complete:  # the bag is implicit: the captures are new exactly when the value is
        return [f"c = {caps}", f"k = {key}", *_fire(h, "+", "k")]
    return [
        f"c = {caps}",
        f"k = {key}",
        f"n = {h}.get(k)",
        "if n is None:",
        f"    {h}[k] = 1",
        *_indent(_fire(h, "+", "k"), 4),
        "else:",
        f"    {h}[k] = n + 1",
    ]


def _bag_remove(h: str, caps: str, n: int, complete: bool) -> list[str]:
    key = _captures_key(n, complete)
    if complete:
        return [f"c = {caps}", f"k = {key}", *_fire(h, "-", "k")]
    return [
        f"c = {caps}",
        f"k = {key}",
        f"n = {h}[k]",
        "if n == 1:",
        f"    del {h}[k]",
        *_indent(_fire(h, "-", "k"), 4),
        "else:",
        f"    {h}[k] = n - 1",
    ]


def _bag_msg(h: str, caps: str) -> list[str]:
    return [f"c = {caps}", *_fire(h, "!", "None")]


def _handler_fns(key: tuple, kinds: dict, complete: bool) -> tuple:
    """Generate ``add/remove/msg/test(h, v)`` for handlers with ``key``: projections and
    checks inlined; ``test`` returns the captures vector, or None if a check fails."""
    g = _Gen()
    conds, caps, n = _handler_parts(g, key, kinds)
    fn = [
        "def add(h, v):",
        *_indent(_checked(conds, _bag_add("h", caps, n, complete)), 4),
        "def remove(h, v):",
        *_indent(_checked(conds, _bag_remove("h", caps, n, complete)), 4),
        "def msg(h, v):",
        *_indent(_checked(conds, _bag_msg("h", caps)), 4),
        "def test(h, v):",
        *_indent(_checked(conds, [f"return {caps}"]), 4),
        "    return None",
        "return add, remove, msg, test",
    ]
    return _factory(g.source(fn))(**g.params)


def _direct(conds: list[str], caps: str, key: str, event: str, general: list[str]) -> list[str]:
    """Call ``leaf.cb`` (see :class:`Leaf`) with the captures ``caps`` and their ``key`` (an
    expression of ``c``, or ``None``) if it is set, else run the ``general`` code."""
    call = (
        [f"f('{event}', {caps}, None)"]
        if key == "None"
        else [f"c = {caps}", f"f('{event}', c, {key})"]
    )
    return [
        "f = leaf.cb",
        "if f is not None:",
        *_indent(_checked(conds, call), 4),
        "else:",
        *_indent(general, 4),
    ]


_INLINE_BUDGET = 8
"""How many descendant nodes one generated walker may inline."""


def _class_guard(g: _Gen, cls: tuple, body: list[str]) -> list[str]:
    """``body`` run only if ``s`` is of class ``cls`` (tested inline, no table lookup)."""
    if cls[0] == "rec":
        if cls[1].__class__ is Symbol:  # interned: equal symbols are the same object
            sym = g.bind("N", cls[1])
            return [
                f"if s.__class__ is Record and s.label is {sym} and len(s.fields) == {cls[2]}:",
                *_indent(body, 4),
            ]
        label = g.bind("N", cls[1])  # the label's exact key (see _classify)
        return [
            f"if s.__class__ is Record and len(s.fields) == {cls[2]}:",
            f"    if KEY(s.label) == {label}:",
            *_indent(body, 8),
        ]
    if cls[0] == "arr":
        return [f"if s.__class__ is tuple and len(s) == {cls[1]}:", *_indent(body, 4)]
    return ["if s.__class__ is FrozenDict:", *_indent(body, 4)]


def _class_switch(g: _Gen, edge: Edge, call: str) -> list[str]:
    """Find the child of ``edge`` whose class fits ``s`` in tables and call ``child.<call>``."""
    sym: dict[tuple, Node] = {}
    rec: dict[tuple, Node] = {}
    arr: dict[int, Node] = {}
    dct: Node | None = None
    for cls, child in edge.classes.items():
        if cls[0] == "rec":
            if cls[1].__class__ is Symbol:
                sym[(cls[1].name, cls[2])] = child
            else:
                rec[(cls[1], cls[2])] = child
        elif cls[0] == "arr":
            arr[cls[1]] = child
        else:
            dct = child
    lines = ["c = s.__class__"]
    branch = "if"
    if sym or rec:
        lines.append(f"{branch} c is Record:")
        branch = "elif"
        lines.append("    l = s.label")
        if sym and rec:
            lines += [
                "    if l.__class__ is Symbol:",
                f"        n = {g.bind('S', sym)}.get((l.name, len(s.fields)))",
                "    else:",
                f"        n = {g.bind('R', rec)}.get((KEY(l), len(s.fields)))",
            ]
        elif sym:
            lines.append(
                f"    n = {g.bind('S', sym)}.get((l.name, len(s.fields)))"
                " if l.__class__ is Symbol else None"
            )
        else:
            lines.append(f"    n = {g.bind('R', rec)}.get((KEY(l), len(s.fields)))")
        lines += ["    if n is not None:", f"        n.{call}"]
    if arr:
        lines += [
            f"{branch} c is tuple:",
            f"    n = {g.bind('A', arr)}.get(len(s))",
            "    if n is not None:",
            f"        n.{call}",
        ]
        branch = "elif"
    if dct is not None:
        lines += [f"{branch} c is FrozenDict:", f"    {g.bind('X', dct)}.{call}"]
    return lines


class _Walkers:
    """Generates the walkers of one *owner* node: the paper's ``modify`` specialised to it.

    A child reached through an edge with a single class is inlined (up to a budget), so a
    chain of nodes costs one call; other children are called through ``child.add`` etc.
    The local names the code uses (``s``, ``l``, ``key``, ``leaf``...) are always assigned
    before use within one node's or one edge's block, so inlined blocks can reuse them.
    """

    def __init__(self) -> None:
        self.g = _Gen()
        self.g.params.update(Record=Record, Symbol=Symbol, FrozenDict=FrozenDict, Leaf=Leaf)
        self.inlined: list[Node] = []
        self.boundary: list[Node] = []
        self.budget = _INLINE_BUDGET

    def bodies(self, node: Node) -> tuple[list[str], list[str], list[str]]:
        """The add, remove and message code of ``node`` (and of what it inlines)."""
        g = self.g
        add: list[str] = []
        rem: list[str] = []
        msg: list[str] = []
        if node.cont.cache is not None:
            cache = g.bind("C", node.cont.cache)
            add.append(f"{cache}[id(v)] = v")
            rem.append(f"del {cache}[id(v)]")
        for table in node.cont.table.values():
            a, r, m = self.table(node, table)
            add += a
            rem += r
            msg += m
        for edge in node.edges.values():
            expr = g.path(edge.path, node.kinds)
            if len(edge.classes) == 1 and self.budget > 0:
                self.budget -= 1
                ((cls, child),) = edge.classes.items()
                self.inlined.append(child)
                a, r, m = self.bodies(child)
                add += [f"s = {expr}", *_class_guard(g, cls, a or ["pass"])]
                rem += [f"s = {expr}", *_class_guard(g, cls, r or ["pass"])]
                msg += [f"s = {expr}", *_class_guard(g, cls, m or ["pass"])]
            elif len(edge.classes) == 1:
                ((cls, child),) = edge.classes.items()
                self.boundary.append(child)
                x = g.bind("X", child)
                add += [f"s = {expr}", *_class_guard(g, cls, [f"{x}.add(v)"])]
                rem += [f"s = {expr}", *_class_guard(g, cls, [f"{x}.remove(v)"])]
                msg += [f"s = {expr}", *_class_guard(g, cls, [f"{x}.msg(v)"])]
            else:
                self.boundary.extend(edge.classes.values())
                add += [f"s = {expr}", *_class_switch(g, edge, "add(v)")]
                rem += [f"s = {expr}", *_class_switch(g, edge, "remove(v)")]
                msg += [f"s = {expr}", *_class_switch(g, edge, "msg(v)")]
        return add, rem, msg

    def table(self, node: Node, table: ConstTable) -> tuple[list[str], list[str], list[str]]:
        """Code for one const table: find the leaf, update its cache, run its handlers."""
        g = self.g
        key = g.key(table.paths, node.kinds)
        lv = g.bind("L", table.leaves)
        # the handlers of other keys, then (before them) the inlined primary handler
        p_add = ["if leaf.adds:", "    for f, x in leaf.adds:", "        f(x, v)"]
        p_rem = ["if leaf.removes:", "    for f, x in leaf.removes:", "        f(x, v)"]
        p_msg = ["if leaf.msgs:", "    for f, x in leaf.msgs:", "        f(x, v)"]
        if table.primary is not None:
            conds, caps, n = _handler_parts(g, table.primary, node.kinds)
            complete = table.complete[table.primary]
            head = ["h = leaf.h", "if h is not None:"]
            p_add = [
                *head,
                *_indent(_checked(conds, _bag_add("h", caps, n, complete)), 4),
                *p_add,
            ]
            p_rem = [
                *head,
                *_indent(_checked(conds, _bag_remove("h", caps, n, complete)), 4),
                *p_rem,
            ]
            p_msg = [*head, *_indent(_checked(conds, _bag_msg("h", caps)), 4), *p_msg]
            if complete:  # the lone callback straight from the leaf when there is one (Leaf.cb)
                ckey = _captures_key(n, complete)
                p_add = _direct(conds, caps, ckey, "+", p_add)
                p_rem = _direct(conds, caps, ckey, "-", p_rem)
                p_msg = _direct(conds, caps, "None", "!", p_msg)
        add = [
            *key,
            f"leaf = {lv}.setdefault(key, v)",
            "if leaf is not v:",  # else v is now the leaf: a single-value handler-less leaf
            "    t = leaf.__class__",
            "    if t is Leaf:",
            "        if leaf.one is MISSING:",
            "            leaf.one = v",
            "        else:",
            "            leaf[id(v)] = v",
            *_indent(p_add, 8),
            "    elif t is dict:",
            "        leaf[id(v)] = v",
            "    else:",
            f"        {lv}[key] = {{id(leaf): leaf, id(v): v}}",
        ]
        rem = [
            f"key = {g.probe(table.paths, node.kinds)}",
            f"leaf = {lv}[key]",
            "if leaf is v:",  # a single-value handler-less leaf
            f"    del {lv}[key]",
            "elif leaf.__class__ is Leaf:",
            "    if leaf.one is v:",
            "        leaf.one = MISSING",
            "    else:",
            "        del leaf[id(v)]",
            *_indent(p_rem, 4),
            "else:",
            "    del leaf[id(v)]",
            "    if not leaf:",
            f"        del {lv}[key]",
        ]
        msg = [
            f"leaf = {lv}.get({g.probe(table.paths, node.kinds)})",
            "if leaf.__class__ is Leaf:",
            *_indent(p_msg, 4),
        ]
        return add, rem, msg


# The root's walkers are also the index's entry points: the bag update comes first.
_ROOT_ENTRY = [
    "def add_assertion(v):",
    "    k = v if v.__class__ is Record else KEY(v)",
    "    n = len(BAG)",
    "    c = BAG.setdefault(k, v)",
    "    if len(BAG) == n:",
    "        MULTI[k] = MULTI.get(k, 1) + 1",
    "        return",
    "ADD",
    "def remove_assertion(v):",
    "    k = v if v.__class__ is Record else KEY(v)",
    "    c = BAG.pop(k, MISSING)",
    "    if c is MISSING:",
    "        raise NOT_HELD(v)",
    "    if MULTI:",
    "        n = MULTI.get(k)",
    "        if n is not None:",
    "            if n == 2:",
    "                del MULTI[k]",
    "            else:",
    "                MULTI[k] = n - 1",
    "            BAG[k] = c",
    "            return",
    "    v = c",
    "REMOVE",
    "def send_message(v):",
    "MSG",
]


def _not_held(v: Value) -> ValueError:
    return ValueError(f"retracting an assertion that is not held: {v!r}")


def _generate(node: Node, index: Index | None) -> None:
    """(Re)generate the walkers of owner ``node`` and of boundary nodes that need them."""
    w = _Walkers()
    add, rem, msg = w.bodies(node)
    add, rem, msg = add or ["pass"], rem or ["pass"], msg or ["pass"]
    body = [
        "def add(v):",
        *_indent(add, 4),
        "def remove(v):",
        *_indent(rem, 4),
        "def msg(v):",
        *_indent(msg, 4),
    ]
    if index is None:
        body.append("return add, remove, msg")
    else:
        w.g.params.update(BAG=index._bag, MULTI=index._multi, NOT_HELD=_not_held)
        parts = {"ADD": add, "REMOVE": rem, "MSG": msg}
        for line in _ROOT_ENTRY:
            body += _indent(parts[line], 4) if line in parts else [line]
        body.append("return add, remove, msg, add_assertion, remove_assertion, send_message")
    fns = _factory(w.g.source(body))(**w.g.params)
    node.add, node.remove, node.msg = fns[:3]
    node.owner = node
    if index is not None:
        index.add_assertion, index.remove_assertion, index.send_message = fns[3:]
    for x in w.inlined:
        x.owner = node
    for x in w.boundary:
        if x.owner is not x:
            _generate(x, None)


def _skeleton_kinds(skeleton: Skeleton) -> dict:
    """Container kind at each position the shape pins, after checking that every path of the
    skeleton stays inside its shape (a hand-made skeleton could otherwise break the walkers)."""
    kinds: dict[Path, str] = {}
    sizes: dict[Path, int] = {}

    def fits(path: Path, what: str) -> None:
        for j, step in enumerate(path):
            prefix = path[:j]
            if prefix not in kinds:
                raise ValueError(f"{what} path {path!r} is not inside the skeleton's shape")
            if kinds[prefix] != "dict" and not (
                step.__class__ is int and 0 <= step < sizes[prefix]
            ):
                raise ValueError(f"{what} path {path!r}: no position {step!r} at {prefix!r}")

    for path, cls in skeleton.shape:
        if (
            cls.__class__ is not tuple
            or not cls
            or cls[0] not in ("rec", "arr", "dict")
            or len(cls) != {"rec": 3, "arr": 2, "dict": 1}[cls[0]]
            or (cls[0] != "dict" and not (cls[-1].__class__ is int and cls[-1] >= 0))
        ):
            raise ValueError(f"bad class {cls!r} in skeleton shape")
        fits(path, "shape")
        kinds[path] = cls[0]
        sizes[path] = cls[-1] if cls[0] != "dict" else 0
    for path in skeleton.const_paths:
        fits(path, "const")
    for path in skeleton.capture_paths:
        fits(path, "capture")
    for path, check in skeleton.checks:
        fits(path, "check")
        if not isinstance(check, Check):
            raise ValueError(f"not a Check: {check!r}")
    if len(skeleton.const_paths) != len(skeleton.const_values):
        raise ValueError("skeleton const_paths and const_values differ in length")
    return kinds


# --------------------------------------------------------------------------------------------
# The index


class Index:
    """Assertions (a bag) and handlers (a trie of skeletons), kept in step.

    The three hot entry points are plain callables set on each instance, generated together
    with the root's walkers (so an assertion costs no call before the trie walk):

    * ``add_assertion(v)``: add one copy of ``v``; the first copy fires ``"+"`` wherever a
      captures vector becomes present.
    * ``remove_assertion(v)``: remove one copy (``ValueError`` if none is held); the last copy
      fires ``"-"`` wherever a captures vector goes away.
    * ``send_message(v)``: every callback of every matching handler gets ``("!", captures, None)``
      once; nothing is kept.
    """

    __slots__ = (
        "_bag",
        "_multi",
        "_registrations",
        "_root",
        "add_assertion",
        "remove_assertion",
        "send_message",
    )

    # Generated with the root's walkers (see the class docstring); declared for type checkers.
    add_assertion: Callable[[Value], None]
    remove_assertion: Callable[[Value], None]
    send_message: Callable[[Value], None]

    def __init__(self) -> None:
        # The bag: exact key -> canonical value (the object first asserted), with copy counts
        # kept apart in ``_multi`` (key -> count) only for values held more than once, so the
        # common single copy costs one hash and no allocation.
        self._bag: dict[Value, Value] = {}
        self._multi: dict[Value, int] = {}
        self._root = Node(None, None, None, {})
        self._root.cont.cache = None  # the bag
        self._registrations = 0
        _generate(self._root, self)

    def adjust_assertion(self, v: Value, delta: int) -> None:
        """Change the copy count of ``v`` by ``delta`` (the paper's ``adjustAssertion``).

        Only a change between zero and non-zero fires events. Going below zero raises
        ``ValueError`` and changes nothing. ``delta == 0`` does nothing.
        """
        if delta.__class__ is not int:
            raise TypeError(f"delta must be an int, not {type(delta).__name__}")
        if delta == 0:
            return
        held = self.count(v)
        n = held + delta
        if n < 0:
            raise ValueError(f"retracting {-delta} copies of {v!r}, {held} held")
        bag = self._bag
        multi = self._multi
        k = exact_key(v)
        if held == 0:
            bag[k] = v
            if n > 1:
                multi[k] = n
            self._root.add(v)
            return
        c = bag[k]
        if n == 0:
            del bag[k]
            multi.pop(k, None)
            self._root.remove(c)
        elif n == 1:
            multi.pop(k, None)
        else:
            multi[k] = n

    def apply_patch(self, adds: Iterable[Value], removes: Iterable[Value]) -> None:
        """Apply a patch: all additions, then all removals (so no observer sees a glitch).

        Raises ``ValueError`` before changing anything if a removal is not covered by the copies
        held plus the patch's own additions.
        """
        adds = list(adds)
        removes = list(removes)
        if removes:
            added = Counter(map(exact_key, adds))
            for k, n in Counter(map(exact_key, removes)).items():
                v = key_value(k)
                if self.count(v) + added[k] < n:
                    raise ValueError(f"patch retracts {n} copies of {v!r}, fewer are held")
        for v in adds:
            self.add_assertion(v)
        for v in removes:
            self.remove_assertion(v)

    # ---- handlers ---------------------------------------------------------------------------

    def add_handler(self, skeleton: Skeleton, callback: Callback) -> None:
        """Install ``callback`` under ``skeleton``; it is told ``"+"`` for each distinct
        captures vector already present. Adding the same pair twice does nothing."""
        hkey = (skeleton.capture_paths, skeleton.checks)
        dirty: list[Node] = []
        node = self._find(skeleton.shape)
        table = None if node is None else node.cont.table.get(skeleton.const_paths)
        complete = None if table is None else table.complete.get(hkey)
        if complete is None:
            # New structure for this skeleton: check it all. (Otherwise its shape, const paths
            # and handler key were checked when the table and handler key were set up.)
            kinds = _skeleton_kinds(skeleton)
            node = self._extend(skeleton.shape, kinds, dirty)
            table = node.cont.table.get(skeleton.const_paths)
            if table is None:
                table = self._new_table(node, skeleton.const_paths)
                table.primary = hkey
                dirty.append(node)
            complete = table.complete[hkey] = _complete(skeleton)
            table.fns[hkey] = _handler_fns(hkey, kinds, complete)
        elif len(skeleton.const_values) != len(skeleton.const_paths):
            raise ValueError("skeleton const_paths and const_values differ in length")
        key = _const_key(skeleton.const_values)
        leaves = table.leaves
        leaf = leaves.get(key, MISSING)
        if leaf is MISSING:
            leaf = leaves[key] = Leaf().setup([])
        elif leaf.__class__ is not Leaf:
            leaf = leaves[key] = Leaf().setup(_leaf_values(leaf))
        h = leaf.handlers.get(hkey)
        if h is None:
            h = Handler().setup(hkey, complete)
            h.fns = table.fns[hkey]
            if not complete:
                test = h.fns[3]
                for v in leaf.cached():
                    caps = test(h, v)
                    if caps is not None:
                        k = exact_key(caps)
                        h[k] = h.get(k, 0) + 1
            leaf.handlers[hkey] = h
            table.handlers += 1
        elif callback in h.callbacks:
            return
        if dirty:
            self._refresh(dirty)
        h.callbacks[callback] = None
        h.set_callbacks()
        leaf.refresh(table.primary)
        self._registrations += 1
        for caps in h.present(leaf):
            callback("+", caps, exact_key(caps))

    def remove_handler(self, skeleton: Skeleton, callback: Callback) -> None:
        """Uninstall ``callback`` from ``skeleton`` (no events); unknown pairs are ignored."""
        node = self._find(skeleton.shape)
        if node is None:
            return
        table = node.cont.table.get(skeleton.const_paths)
        if table is None:
            return
        key = _const_key(skeleton.const_values)
        leaf = table.leaves.get(key)
        if leaf.__class__ is not Leaf:
            return
        hkey = (skeleton.capture_paths, skeleton.checks)
        h = leaf.handlers.get(hkey)
        if h is None or callback not in h.callbacks:
            return
        del h.callbacks[callback]
        h.set_callbacks()
        self._registrations -= 1
        if h.callbacks:
            leaf.refresh(table.primary)
            return
        del leaf.handlers[hkey]
        leaf.refresh(table.primary)
        table.handlers -= 1
        if not leaf.handlers:  # a Leaf always has handlers: back to a plain cache, or gone
            cached = leaf.cached()
            if not cached:
                del table.leaves[key]
            elif len(cached) == 1:
                table.leaves[key] = cached[0]
            else:
                table.leaves[key] = {id(x): x for x in cached}
        if table.handlers == 0:
            cont = node.cont
            if len(cont.table) == 1 and node is not self._root:
                cont.cache = dict(self._cache_items(node))
            del cont.table[skeleton.const_paths]
            self._prune(node)

    # ---- queries ----------------------------------------------------------------------------

    def count(self, v: Value) -> int:
        """How many copies of ``v`` are held."""
        k = exact_key(v)
        if k not in self._bag:
            return 0
        return self._multi.get(k, 1) if self._multi else 1

    def __len__(self) -> int:
        """The number of distinct assertions held."""
        return len(self._bag)

    def __contains__(self, v: Value) -> bool:
        return exact_key(v) in self._bag

    def assertions(self) -> Iterator[Value]:
        """The distinct assertions held (each once, whatever its count)."""
        return iter(list(self._bag.values()))

    def handler_count(self) -> int:
        """The number of installed (skeleton, callback) pairs."""
        return self._registrations

    def is_empty(self) -> bool:
        """No assertions, no handlers, and no structure left over from either."""
        root = self._root
        return not self._bag and not self._registrations and not root.cont.table and not root.edges

    def stats(self) -> dict[str, int]:
        """Sizes of the structure (nodes, const tables, leaves, handlers), for tests and tuning."""
        out = {"nodes": 0, "tables": 0, "leaves": 0, "handlers": 0}
        stack = [self._root]
        while stack:
            node = stack.pop()
            out["nodes"] += 1
            for table in node.cont.table.values():
                out["tables"] += 1
                out["leaves"] += len(table.leaves)
                for leaf in table.leaves.values():
                    if leaf.__class__ is Leaf:
                        out["handlers"] += len(leaf.handlers)
            for edge in node.edges.values():
                stack.extend(edge.classes.values())
        return out

    def __repr__(self) -> str:
        return f"<Index {len(self._bag)} assertions, {self._registrations} handlers>"

    # ---- structure maintenance ----------------------------------------------------------------

    def _refresh(self, changed: list[Node]) -> None:
        """Regenerate the walkers containing the code of nodes whose structure changed."""
        owners: dict[int, Node] = {}
        for node in changed:
            if node.owner is None:
                continue  # new: generated with its parent, which changed too
            while node.owner is not node:
                node = node.owner  # type: ignore[assignment]
            owners[id(node)] = node
        for owner in owners.values():
            _generate(owner, self if owner is self._root else None)

    def _cache_items(self, node: Node) -> list[tuple[int, Value]]:
        """The continuation cache of ``node`` as ``(id, value)`` pairs, whatever its form."""
        if node is self._root:
            return [(id(c), c) for c in self._bag.values()]
        cont = node.cont
        if cont.cache is not None:
            return list(cont.cache.items())
        table = next(iter(cont.table.values()))
        return [(id(v), v) for leaf in table.leaves.values() for v in _leaf_values(leaf)]

    def _extend(self, shape: tuple, kinds: dict, dirty: list[Node]) -> Node:
        """The paper's ``extend``: the node at the end of ``shape``, created as needed, with
        each new node's cache filtered from its parent's."""
        node = self._root
        for path, cls in shape:
            edge = node.edges.get(path)
            if edge is None:
                edge = node.edges[path] = Edge(path, _make_getter(path, node.kinds))
            child = edge.classes.get(cls)
            if child is None:
                child_kinds = dict(node.kinds)
                child_kinds[path] = kinds[path]
                child = Node(node, edge, cls, child_kinds)
                project = edge.project
                cache = child.cont.cache
                for k, v in self._cache_items(node):
                    if _classify(project(v)) == cls:
                        cache[k] = v
                edge.classes[cls] = child
                dirty.append(node)
                dirty.append(child)
            node = child
        return node

    def _find(self, shape: tuple) -> Node | None:
        node = self._root
        for path, cls in shape:
            edge = node.edges.get(path)
            if edge is None:
                return None
            child = edge.classes.get(cls)
            if child is None:
                return None
            node = child
        return node

    def _new_table(self, node: Node, paths: tuple[Path, ...]) -> ConstTable:
        """A const table for ``paths`` at ``node``, its leaves filled from the node's cache."""
        table = ConstTable(paths)
        keyof = _make_key_getter(paths, node.kinds)
        leaves = table.leaves
        for k, v in self._cache_items(node):
            key = keyof(v)
            leaf = leaves.get(key, MISSING)
            if leaf is MISSING:
                leaves[key] = v
            elif leaf.__class__ is dict:
                leaf[k] = v
            else:
                leaves[key] = {id(leaf): leaf, k: v}
        node.cont.table[paths] = table
        node.cont.cache = None  # the leaves of the table now hold the cache
        return table

    def _prune(self, node: Node) -> None:
        """Remove ``node`` and its ancestors while they hold nothing; regenerate the rest."""
        root = self._root
        while node is not root and not node.cont.table and not node.edges:
            parent, edge = node.parent, node.edge
            del edge.classes[node.cls]  # type: ignore[union-attr]
            if not edge.classes:  # type: ignore[union-attr]
                del parent.edges[edge.path]  # type: ignore[union-attr]
            node = parent  # type: ignore[assignment]
        self._refresh([node])
