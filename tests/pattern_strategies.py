"""Hypothesis strategies over a small universe of values and patterns.

The universe is small on purpose so that random patterns and values overlap a lot: patterns are
drawn *shaped after* values (so they usually match), with twists so that some miss. Shared by
the index's model test and the skeleton-versus-match property test.
"""

from __future__ import annotations

from hypothesis import strategies as st

from feds.pattern_forms import TYPE_NAMES
from feds.values import NAN, FrozenDict, Record, Symbol
from tests.builders import D, and_, bind, group, lit, rng

S = Symbol

# ---- the universe ----------------------------------------------------------------------------

ATOMS = [0, 1, 2, True, 1.5, -0.0, "a", "ab", "", S("a"), None, NAN, b"x"]
LABELS = [S("a"), S("b"), "s"]
KEYS = ["k", "j", 0]
TYPES = list(TYPE_NAMES)

atoms = st.sampled_from(ATOMS)
values = st.recursive(
    atoms,
    lambda kids: st.one_of(
        st.builds(
            lambda lab, fs: Record(lab, tuple(fs)),
            st.sampled_from(LABELS),
            st.lists(kids, max_size=3),
        ),
        st.lists(kids, max_size=2).map(tuple),
        st.dictionaries(st.sampled_from(KEYS), kids, max_size=2).map(FrozenDict),
    ),
    max_leaves=6,
)

bounds = st.sampled_from([None, -1, 0, 1, 1.5, 2])
constraints = st.one_of(
    st.sampled_from(TYPES).map(lambda t: Record(S("type"), (S(t),))),
    st.frozensets(atoms, max_size=3).map(lambda s: Record(S("one-of"), (s,))),
    st.builds(rng, bounds, bounds, st.booleans(), st.booleans()),
    st.sampled_from(["a", "^a$", "b", "^$", "a|b"]).map(lambda s: Record(S("regex"), (s,))),
)


@st.composite
def variant_of(draw: st.DrawFn, v: object) -> object:
    """``v`` with some atoms replaced: same structure, other constants."""
    if v.__class__ is Record:
        return Record(v.label, tuple(draw(variant_of(f)) for f in v.fields))  # type: ignore[attr-defined]
    if v.__class__ is tuple:
        return tuple(draw(variant_of(x)) for x in v)  # type: ignore[attr-defined]
    if v.__class__ is FrozenDict:
        return FrozenDict({k: draw(variant_of(x)) for k, x in v.items()})  # type: ignore[attr-defined]
    return draw(atoms) if draw(st.integers(0, 2)) == 0 else v


TWINS = {1: [True, 1.0], 0: [False, 0.0, -0.0], 1.5: [1.5], 2: [2.0]}


@st.composite
def twin_of(draw: st.DrawFn, v: object) -> object:
    """A value Python finds equal to ``v``, built from other objects: the same feds value, or
    (where ``1`` became ``#t``, ``1.0`` or ...) a different one."""
    if v.__class__ is Record:
        return Record(v.label, tuple(draw(twin_of(f)) for f in v.fields))  # type: ignore[attr-defined]
    if v.__class__ is tuple:
        return tuple([draw(twin_of(x)) for x in v])  # type: ignore[attr-defined]
    if v.__class__ is FrozenDict:
        return FrozenDict({k: draw(twin_of(x)) for k, x in v.items()})  # type: ignore[attr-defined]
    if v.__class__ in (int, bool, float) and v in TWINS:
        return draw(st.sampled_from([v, *TWINS[v]]))
    return v


@st.composite
def mutant_of(draw: st.DrawFn, p: Record, depth: int = 0) -> Record:
    """``p`` with one sub-pattern replaced: a pattern sharing most of its structure."""
    if p.label == S("group") and depth < 5 and draw(st.integers(0, 3)):
        kind, entries = p.fields
        if entries:
            k = draw(st.sampled_from(sorted(entries, key=repr)))
            new = dict(entries.items())
            new[k] = draw(mutant_of(entries[k], depth + 1))
            return group(kind, new)
    return draw(st.sampled_from([D, bind(), lit(draw(atoms)), draw(constraints)]))


@st.composite
def sibling_of(draw: st.DrawFn, p: Record) -> Record:
    """``p`` with other constants and captures: often the same shape and const paths, so the
    index puts it in the same const table (another leaf) or the same leaf (another handler)."""
    name = p.label.name  # type: ignore[attr-defined]
    if name == "lit":
        return lit(draw(st.sampled_from([p.fields[0], *ATOMS])))
    if name == "bind":
        inner = draw(sibling_of(p.fields[0]))
        return inner if draw(st.integers(0, 3)) == 0 else bind(inner)
    if name == "_":
        return bind() if draw(st.integers(0, 3)) == 0 else D
    if name == "group":
        kind, entries = p.fields
        return group(kind, {k: draw(sibling_of(q)) for k, q in entries.items()})
    if name == "and":
        return and_(*[draw(sibling_of(q)) for q in p.fields[0]])
    return p


def type_of(v: object) -> str:
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, int):
        return "integer"
    return {
        float: "float",
        str: "string",
        bytes: "bytes",
        Symbol: "symbol",
        Record: "record",
        tuple: "sequence",
        frozenset: "set",
        FrozenDict: "dict",
    }.get(v.__class__, "number")


@st.composite
def constraint_for(draw: st.DrawFn, v: object) -> Record:
    """A constraint, usually one that ``v`` passes."""
    if draw(st.integers(0, 3)) == 0:
        return draw(constraints)
    options = [
        Record(S("type"), (S(type_of(v)),)),
        Record(S("one-of"), (frozenset([v, *draw(st.lists(atoms, max_size=2))]),)),
    ]
    if type_of(v) in ("integer", "float") and v == v:
        options.append(rng(v - draw(st.sampled_from([0, 1])), None, draw(st.booleans()), False))
        options.append(rng(None, v, False, draw(st.booleans())))
    if isinstance(v, str):
        options.append(Record(S("regex"), (draw(st.sampled_from(["", "^", v[:1], f"{v}$"])),)))
    return draw(st.sampled_from(options))


@st.composite
def pattern_for(draw: st.DrawFn, v: object, depth: int = 0) -> Record:
    """A pattern shaped after ``v`` (so it usually matches): nested groups, constants,
    captures, discards, constraints, with occasional twists (another label, arity, key or
    constant) so that some patterns miss."""
    kinds = ["discard", "bind", "bind", "lit", "constraint", "and"]
    if v.__class__ in (Record, tuple, FrozenDict) and depth < 4:
        kinds += ["group"] * 8
    kind = draw(st.sampled_from(kinds))
    if kind == "discard":
        return D
    if kind == "bind":
        return bind(draw(pattern_for(v, depth + 1)))
    if kind == "lit":
        return lit(v if draw(st.integers(0, 4)) else draw(atoms))
    if kind == "constraint":
        return draw(constraint_for(v))
    if kind == "and":
        items = draw(st.lists(constraint_for(v), max_size=2))
        items.append(draw(pattern_for(v, depth + 1)))  # the only item that may be structural
        return and_(*draw(st.permutations(items)))
    twist = draw(st.integers(0, 7)) == 0
    if v.__class__ is FrozenDict:
        present = sorted(v, key=repr)  # type: ignore[call-overload]
        keys = draw(st.lists(st.sampled_from(present), unique=True)) if present else []
        entries = {k: draw(pattern_for(v[k], depth + 1)) for k in keys}  # type: ignore[index]
        if twist:
            entries[draw(st.sampled_from(KEYS))] = draw(st.sampled_from([D, bind()]))
        return group(Record(S("dict"), ()), entries)
    items = list(v.fields if v.__class__ is Record else v)  # type: ignore[attr-defined]
    subs = [draw(pattern_for(x, depth + 1)) for x in items]
    if twist:
        subs = subs[:-1] if subs and draw(st.booleans()) else [*subs, D]
    if v.__class__ is Record:
        label = draw(st.sampled_from(LABELS)) if twist else v.label  # type: ignore[attr-defined]
        return group(Record(S("rec"), (label,)), dict(enumerate(subs)))
    return group(Record(S("arr"), ()), dict(enumerate(subs)))
