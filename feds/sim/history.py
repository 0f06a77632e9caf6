"""Does one dataspace explain what an observer entity saw? The history check of the property test.

An observer entity ``E`` receives a *history*: ``+c`` (captures ``c`` asserted at it), ``-c``
(retracted) and ``!c`` (a message), in order. One dataspace that processed every client's actions
one at a time would have given ``E`` a history determined by that order. With several clients
acting concurrently a federation may legitimately interleave *different* senders otherwise than
one dataspace would (they are concurrent, and a subscription reaches each sender's node at its
own time), but nothing else. :func:`explain` decides whether ``E``'s history is one of the
histories this allows:

* **Observations.** Each distinct ``<Observe P ref-to-E>`` value is counted in the bag at ``E``'s
  node; while its count is above zero it is one *instance* (a count going 0 → 1 → 0 → 1 makes two
  instances). Instances of one value are withdrawn in order.
* **Windows.** For each instance ``i`` and each sender ``s`` (a client actor), ``i`` sees a
  *contiguous window* of ``s``'s actions: from a start position ``p`` (chosen by the check; when
  ``i``'s subscription met ``s``'s stream), at which ``i`` learns what ``s`` then holds, until
  ``i`` is withdrawn. Within the window each action has exactly the effect it has on one
  dataspace's observer ``i``: a message matching ``P`` gives ``!c`` once; assertions and
  retractions change ``i``'s count of each captures vector, and ``E`` hears ``+c``/``-c`` exactly
  when a count of ``i`` goes 0 → 1 / 1 → 0 (one dataspace deduplicates captures per observer, over
  every sender). Withdrawing ``i`` retracts all it holds, after which ``i`` is silent.
* **Per-sender order.** Whatever ``E`` hears because of ``s``'s actions, through any of its
  instances, comes in ``s``'s order (a start at ``p`` counts as between ``s``'s actions ``p`` and
  ``p + 1``); the events one action gives one instance come together (in any order among them).
  The events ``E`` receives in one turn (one batch, one time stamp) come at once: their order
  within the turn is free.
* **Causal order and real time.** Nothing is heard from an action before it was issued, or from an
  instance before it was opened; a withdrawal comes after the Observe was retracted. A *quiet
  point* (the overlay settled) is a barrier: at it every open instance has seen every action
  issued before, every closed one has been withdrawn, and an instance opened later starts after
  them. A returned *sync* of client ``c`` (``protocols/wire.md``) is a barrier for ``c``'s actions
  issued before it: at that moment every instance that sees ``c`` has seen them all (one that
  starts later starts after them; one closed and holding nothing may have been withdrawn
  instead), and every instance ``c`` itself opened before the sync has started its window with
  every sender (at a start no later than that sender's last action issued by then, having heard
  what that start gives) — but not caught up with any other sender, nor with ``c``'s own actions
  issued after the sync: those may still be on their way, and one sent right after the Observe
  may even have missed the subscription.

Search: depth-first over the choices (which instance and sender moves next, where windows start),
guided by the history and memoised on the state, with a partial-order reduction (silent moves
are taken only just before a move that they can change; see :func:`_search`); every quiet point
pins the state down, so the search stays small between quiet points. A state from which
counting alone shows the rest cannot be explained is not expanded (:func:`_hopeless`: each
``+c``/``-c`` changes by one how many live instances hold ``c``, which stays between zero and
how many can, and at a quiet point is known; each ``!c`` needs a message not yet heard, sent
between the quiet points around it, :func:`_unsent`): a necessary condition, so no
explanation is lost, and an early wrong choice is dropped at once instead of after every
silent variation behind it. The counting also knows what each instance can still hold and
what holding a vector brings along (if every sender holds a ``<b 1 _>`` only while it holds
``<b 2 0>``, ``<b $x _>`` holds ``(1,)`` only with ``(2,)``): at a turn's end
where every instance that can hold ``c`` must, each holds what ``c`` brings, and each one that
did not has heard a ``+`` of it (:func:`_forced`; necessary conditions too). And an instance
open at a quiet point owes ``E`` every message its started windows have yet to pass before it:
as many ``!`` as ``E`` hears by then, each in its sender's order (:func:`_owed`). A ``+c``
needs an instance that can still gain ``c``: a window passes no more messages than ``E`` has
yet to hear, and one that holds ``c`` wherever it can go keeps its instance holding ``c``
until withdrawn (:func:`_ungained`); a ``-c`` needs one that can still lose it: one that
holds ``c`` (or may come to) and is withdrawn by then or keeps ``c`` in no started window
wherever it can go (:func:`_unlost`). Expanding a state builds silent states (closures,
catch-ups); they count too, :data:`WORK_PER_STATE` per state of the budget, so that the
budget bounds time.
A history that cannot be explained gets a report naming the first event that nothing could
produce; a search that runs out of its budget of states (:data:`BUDGET` unless told) says so
(:data:`GAVE_UP`): undecided, no counterexample.

:mod:`feds.sim.undecided` writes what the check was given to a file and reads it back: the
property test saves every history the check gives up on there and then, and ``python -m
feds.sim.undecided FILE --budget N`` checks it again.
"""

from __future__ import annotations

import bisect
from collections import Counter
from dataclasses import dataclass, field
from itertools import pairwise
from typing import NamedTuple

from feds.patterns import match
from feds.values import Value

__all__ = ["COUNTEREXAMPLE", "GAVE_UP", "Action", "Checkpoint", "Event", "Instance", "explain"]

Event = tuple[int, str, tuple]
"""``(time, kind, captures)`` with kind ``"+"``, ``"-"`` or ``"!"``: one event ``E`` received."""

BUDGET = 50_000
"""States the search may visit, by default, before it gives up (and reports that it did).
5,000 left a history of observer-flood on the binary shape undecided in a run of 100 examples
per case (``FEDS_PROPERTY_EXAMPLES=100``); 20,000 explained it. Only hard histories come near
it: none of the fast suite's examples does. A long run checks a history undecided at this
budget again with a bigger one (``tests/test_federation.py``)."""
WORK_PER_STATE = 64
"""Silent states (:func:`_silent_closure`, :func:`_catch_up_with`) the search may build per
state of its budget, in all, before it gives up. What expanding one state costs is not bounded
by the history's size: a closure over the silent positions of a few senders' windows can hold
a thousand states, and a state tries one per instance and speaking pair (a history of 22
events, five observations and six senders built 700,000 of them for its first 371 states, in a
minute). So a budget of states alone does not bound time; with this it does. A search stopped
by it gives up like one out of states (undecided: no verdict is made up). Decided histories
need far fewer: of 440 random ones decided at a budget of 3,000 states, 438 built under 64
per state of it (two up to 137); the hardest property-test history seen needed 35 per state
of 50,000."""
GAVE_UP = "the check gave up"
"""How a report of :func:`explain` starts when the search ran out of its budget: that is
no counterexample, only an undecided history."""
COUNTEREXAMPLE = "no one-dataspace order explains it"
NO_CEILING = 1 << 62


@dataclass(frozen=True)
class Action:
    """One action of a sender that can touch observers: assertions made or retracted, a message."""

    time: int
    adds: tuple[Value, ...] = ()
    removes: tuple[Value, ...] = ()
    message: tuple[Value, ...] = ()
    """The message sent, as a 0- or 1-tuple."""


@dataclass(frozen=True)
class Instance:
    """One activation of an observation of ``E`` (a distinct ``<Observe pattern ref>``)."""

    pattern: Value
    opened: int
    """When the Observe that took its count from 0 to 1 was issued."""
    closed: int | None
    """When the retraction that took it back to 0 was issued (None: still open)."""
    opener: object
    """The sender (client) whose Observe opened it."""
    previous: int | None = None
    """Index of the earlier instance of the same Observe value (withdrawn before this one acts)."""


@dataclass(frozen=True)
class Checkpoint:
    """A quiet point (``client`` None) or the return of ``client``'s sync, issued at ``issued``."""

    time: int
    client: object = None
    issued: int = 0


@dataclass
class _Pair:
    """What instance ``i`` can see of sender ``s``: per action, its deltas and message captures."""

    sender: int
    deltas: list[tuple[Counter, tuple | None]]
    """Per action of ``s`` (0-based): captures count changes, and the message's captures."""
    held: list[Counter]
    """``held[p]``: captures counts of ``s``'s assertions after its first ``p`` actions."""
    floor: int
    """Lowest start position allowed by quiet points and syncs before the instance opened."""
    relevant: list[int] = field(default_factory=list)
    """Indices of the actions that change what ``i`` sees (the others are skipped)."""
    produces: set[tuple[str, tuple]] = field(default_factory=set)
    """Every ``(kind, captures)`` it could ever give ``E``."""
    touches: frozenset[tuple] = frozenset()
    """Every captures vector its actions change or send."""
    decrements: bool = False
    """Whether one of its actions takes a count down."""
    implies: list[dict[tuple, frozenset[tuple]]] = field(default_factory=list)
    """``implies[f]``: per captures vector ``c`` it holds at some position from ``f`` on, the
    vectors it holds at every such position holding ``c`` (``c`` among them)."""
    speaks: list[int] = field(default_factory=list)
    """``speaks[p]``: the first action from ``p`` on whose message ``i`` hears (none: the
    number of actions)."""


@dataclass
class _Problem:
    timeline: list[tuple]
    """Events ``("e", time, kind, captures)`` and checkpoints ``("q", time, Checkpoint)``."""
    instances: list[Instance]
    pairs: list[list[_Pair]]
    times: list[list[int]]
    """Per sender, the issue times of its actions."""
    senders: list[object]
    produces: list[set[tuple[str, tuple]]] = field(default_factory=list)
    """Per instance, every ``(kind, captures)`` it could ever give ``E``."""
    linked: list[list[tuple[int, ...]]] = field(default_factory=list)
    """Per instance, per pair: the pairs of that instance touching a captures vector it does."""
    visited: set = field(default_factory=set)
    views: dict[tuple[int, tuple[int, ...]], Counter] = field(default_factory=dict)
    """:func:`_view`'s sums, by instance and positions."""
    events: dict[tuple[int, tuple[int, ...], int, int], Counter] = field(default_factory=dict)
    """What a move gives ``E`` (read only), by instance, positions, pair and action (a start
    at ``p``: ``-1 - p``): it depends on nothing else, and many states share them."""
    counts: _Counts | None = None
    """What :func:`_hopeless` needs, computed once."""
    reach: dict[tuple[int, tuple[int, ...]], dict[tuple, frozenset[tuple]]] = field(
        default_factory=dict
    )
    """:func:`_reach`'s answers, by instance and the positions its pairs go on from."""
    audible: dict[tuple[int, tuple[int, ...]], list[Counter]] = field(default_factory=dict)
    """:func:`_audible`'s answers, by instance and the positions its pairs go on from."""
    best: int = 0
    budget: int = BUDGET
    """States the search may visit before it gives up."""
    work: int = 0
    """Silent states built so far (:func:`_silent_closure`, :func:`_catch_up_with`)."""
    work_budget: int = BUDGET * WORK_PER_STATE
    """Silent states the search may build before it gives up."""


def explain(
    history: list[Event],
    instances: list[Instance],
    programs: dict[object, list[Action]],
    checkpoints: list[Checkpoint],
    budget: int = BUDGET,
    work_per_state: int = WORK_PER_STATE,
) -> str | None:
    """None if one dataspace explains ``history`` (see the module docstring), else why not:
    a report starting with :data:`COUNTEREXAMPLE`, or with :data:`GAVE_UP` if undecided after
    visiting ``budget`` states, or building ``work_per_state`` silent states per state of
    ``budget`` (:data:`WORK_PER_STATE`)."""
    senders = list(programs)
    times = [[a.time for a in programs[s]] for s in senders]
    timeline = [("e", t, kind, c) for t, kind, c in history]
    timeline += [("q", cp.time, cp) for cp in checkpoints]
    timeline.sort(key=lambda entry: entry[1])  # stable: a checkpoint after events of its time
    pairs = []
    for inst in instances:
        row = []
        for j, s in enumerate(senders):
            pair = _pair(inst, j, programs[s])
            if pair is not None:
                pair.floor = _floor(inst, s, checkpoints, times[j])
                row.append(pair)
        pairs.append(row)
    produces = [set().union(*(p.produces for p in row)) for row in pairs]
    linked = [
        [tuple(n for n, q in enumerate(row) if p.touches & q.touches) for p in row] for row in pairs
    ]
    problem = _Problem(timeline, instances, pairs, times, senders, produces, linked, budget=budget)
    problem.work_budget = budget * work_per_state
    problem.counts = _counts(problem)
    start = _State(
        0,
        frozenset(),
        tuple(tuple(-1 for _ in row) for row in pairs),
        tuple(p.floor for row in pairs for p in row),
        tuple(NO_CEILING for row in pairs for _ in row),
        tuple(False for _ in instances),
        tuple(-1 for _ in senders),
    )
    try:
        if _search(problem, start):
            return None
    except _GaveUp:
        if problem.work > problem.work_budget:
            return (
                f"{GAVE_UP} after {len(problem.visited)} states and {problem.work_budget} silent"
                f" ones ({work_per_state} per state of its {budget}), undecided"
                f" (stuck at {_where(problem)})"
            )
        return f"{GAVE_UP} after {budget} states, undecided (stuck at {_where(problem)})"
    return f"{COUNTEREXAMPLE}: nothing could produce {_where(problem)}"


class _Counts(NamedTuple):
    """The timeline's ``+``/``-`` events summed up, for :func:`_hopeless`."""

    ends: list[int]
    """Per timeline index: the end of its turn (a checkpoint: itself)."""
    turns: list[tuple[int, int]]
    """Every turn's first index and end."""
    sums: list[Counter]
    """``sums[n]``: per captures vector, the ``+`` minus the ``-`` events before index ``n``."""
    ranges: dict[int, dict[tuple, tuple[int, int]]]
    """By a turn's first index (or the timeline's end): per captures vector, the lowest and
    highest of those sums from there to each later turn's end, relative to its start."""
    quiets: list[tuple[int, Counter, tuple[int, ...], tuple[tuple[int, tuple[int, ...]], ...]]]
    """Per quiet point: its index; what the instances open at it and not closed hold there
    (per captures vector, how many hold it); the other instances that may hold something;
    the instances open at it, each with how many actions of each of its pairs it has seen
    there."""
    messages: list[Counter]
    """``messages[n]``: per captures vector, the ``!`` events from timeline index ``n`` on."""
    sent: list[list[list[Counter]]]
    """Per instance, per pair, per position ``p``: the captures of the messages of the
    sender's actions from ``p`` on that the instance can hear."""
    gains: list[Counter]
    """``gains[n]``: per captures vector, the ``+`` events before timeline index ``n``."""
    stretches: list[tuple[int, int, int | None, int | None]]
    """The timeline cut at its quiet points: per stretch, its first index, its end (the next
    quiet point's index, or the timeline's end), and the times of the quiet points that open
    it and end it (None: the timeline's start or end)."""


def _counts(problem: _Problem) -> _Counts:
    """:attr:`_Problem.counts`. A turn is a run of events of one time (a checkpoint comes
    after the events of its time, so none falls inside a turn)."""
    timeline = problem.timeline
    size = len(timeline)
    ends = list(range(size))
    turns = []
    sums = [Counter()]
    n = 0
    while n < size:
        entry = timeline[n]
        if entry[0] == "e":
            m = n
            while m < size and timeline[m][0] == "e" and timeline[m][1] == entry[1]:
                m += 1
            turns.append((n, m))
            ends[n:m] = [m] * (m - n)
        sums.append(sums[-1].copy())
        if entry[0] == "e" and entry[2] != "!":
            sums[-1][entry[3]] += 1 if entry[2] == "+" else -1
        n += 1
    gains = [Counter()]
    for entry in timeline:
        gains.append(gains[-1].copy())
        if entry[0] == "e" and entry[2] == "+":
            gains[-1][entry[3]] += 1
    ranges: dict[int, dict[tuple, tuple[int, int]]] = {size: {}}
    later: dict[tuple, tuple[int, int]] = {}
    for start, end in reversed(turns):
        net = sums[end].copy()
        net.subtract(sums[start])
        later = {
            c: (min(0, net[c] + lo), max(0, net[c] + hi))
            for c in net.keys() | later.keys()
            for lo, hi in [later.get(c, (0, 0))]
        }
        ranges[start] = later
    quiets = []
    for q, entry in enumerate(timeline):
        if entry[0] != "q" or entry[2].client is not None:
            continue
        time = entry[1]
        fixed: Counter = Counter()
        loose = []
        due = []
        for i, inst in enumerate(problem.instances):
            if inst.closed is not None and inst.closed < time:
                continue  # withdrawn by then, holding nothing
            if inst.opened < time and (inst.closed is None or inst.closed > time):
                # open at the quiet point: it has seen every action issued before it
                row = problem.pairs[i]
                seen = tuple(bisect.bisect_left(problem.times[pair.sender], time) for pair in row)
                held: Counter = Counter()
                for pair, p in zip(row, seen, strict=True):
                    held.update(pair.held[p])
                fixed.update(c for c, k in held.items() if k > 0)
                due.append((i, seen))
            else:
                loose.append(i)
        quiets.append((q, fixed, tuple(loose), tuple(due)))
    messages = [Counter()]
    for entry in reversed(timeline):
        messages.append(messages[-1].copy())
        if entry[0] == "e" and entry[2] == "!":
            messages[-1][entry[3]] += 1
    messages.reverse()
    sent = []
    for row in problem.pairs:
        per_pair = []
        for pair in row:
            later = [Counter()]
            for _changes, message in reversed(pair.deltas):
                later.append(later[-1].copy())
                if message is not None:
                    later[-1][message] += 1
            later.reverse()
            per_pair.append(later)
        sent.append(per_pair)
    cuts = [(q, timeline[q][1]) for q, *_rest in quiets]
    stretches = [
        (start + 1, stop, opening, closing)
        for (start, opening), (stop, closing) in zip(
            [(-1, None), *cuts], [*cuts, (size, None)], strict=True
        )
    ]
    return _Counts(ends, turns, sums, ranges, quiets, messages, sent, gains, stretches)


def _hopeless(problem: _Problem, state: _State) -> int | None:
    """The timeline index of an entry that counting alone shows nothing can produce from
    ``state``, if any (a necessary condition: pruning on it loses no explanation).

    Each ``+c`` that ``E`` hears makes one more live instance hold ``c``, each ``-c`` one
    fewer (a withdrawal hears ``-c`` for each captures it held), and nothing else changes
    which instances hold what. So at the end of every turn the instances holding ``c``
    number those holding it now, plus the ``+c`` and minus the ``-c`` heard since: neither
    below zero nor above the live instances that can hold ``c`` at all. At a quiet point,
    moreover, the instances closed before it hold nothing, and those open hold exactly what
    the senders then hold. Likewise each ``!c`` is one message of a sender that one live
    instance hears once, in its window: no more than those left after where the windows are.
    """
    counts = problem.counts
    assert counts is not None
    timeline = problem.timeline
    idx = state.idx
    end = counts.ends[idx]
    now: Counter = Counter()
    for n in range(idx, end):
        if n not in state.taken:
            entry = timeline[n]
            if entry[2] != "!":
                now[entry[3]] += 1 if entry[2] == "+" else -1
    held: Counter = Counter()
    room: Counter = Counter()
    dead = state.dead
    for i, row in enumerate(state.pos):
        if not dead[i]:
            held.update(c for c, n in _view(problem, i, row).items() if n > 0)
            room.update(c for kind, c in problem.produces[i] if kind == "+")
    held.update(now)
    sums = counts.sums
    base = sums[end]
    following = end
    while following < len(timeline) and timeline[following][0] != "e":
        following += 1
    later = counts.ranges[following]
    for c in held.keys() | later.keys():
        count = held[c]
        if count < 0 or count > room[c]:
            return idx
        lo, hi = later.get(c, (0, 0))
        if count + lo < 0 or count + hi > room[c]:
            for start, stop in counts.turns:
                if start >= following and not 0 <= count + sums[stop][c] - base[c] <= room[c]:
                    return start
    for q, fixed, loose, _due in counts.quiets:
        if q < end:
            continue
        cap = fixed.copy()
        for i in loose:
            if not dead[i]:
                cap.update(c for kind, c in problem.produces[i] if kind == "+")
        there = sums[q]
        for c in held.keys() | there.keys() | fixed.keys():
            if not fixed[c] <= held[c] + there[c] - base[c] <= cap[c]:
                return q
    blocked = _forced(problem, state, held, following)
    if blocked is not None:
        return blocked
    spoken = Counter(timeline[n][3] for n in state.taken if timeline[n][2] == "!")
    blocked = _owed(problem, state, spoken)
    if blocked is not None:
        return blocked
    blocked = _ungained(problem, state, spoken)
    if blocked is not None:
        return blocked
    blocked = _unlost(problem, state, spoken)
    if blocked is not None:
        return blocked
    return _unsent(problem, state, spoken)


def _ungained(problem: _Problem, state: _State, spoken: Counter) -> int | None:
    """The timeline index of a ``+c`` event that no live instance can give ``E`` any more
    from ``state``, if any (a necessary condition: pruning on it loses no explanation).

    ``spoken``: the ``!`` events of the current turn already explained. ``E`` hears ``+c``
    when an instance's count of ``c`` goes from 0 up, so when one of its pairs goes from
    holding no ``c`` to holding some: a window not started starts where its sender holds
    ``c`` (at its lowest start or later), or a started one passes an action from a position
    holding no ``c`` to one holding some (:func:`_gains`). A started window only moves on, and
    passes no more messages than ``E`` has yet to hear: each one it passes is one ``!`` heard
    (a catch-up at a checkpoint passes none; :func:`_reachable`). An instance one of whose
    started windows holds ``c`` wherever it can still go keeps holding ``c`` until withdrawn:
    it hears no ``+c``.
    """
    timeline = problem.timeline
    counts = problem.counts
    assert counts is not None
    remaining = counts.messages[state.idx].copy()
    remaining.subtract(spoken)
    gainable: set[tuple] = set()
    for i, row in enumerate(state.pos):
        if not state.dead[i]:
            gainable |= _gains(problem, state, i, row, remaining)
    for n in range(state.idx, len(timeline)):
        entry = timeline[n]
        if (
            entry[0] == "e"
            and entry[2] == "+"
            and entry[3] not in gainable
            and n not in state.taken
        ):
            return n
    return None


def _gains(
    problem: _Problem, state: _State, i: int, row: tuple[int, ...], remaining: Counter
) -> set[tuple]:
    """The captures vectors whose ``+`` instance ``i`` (positions ``row``) may still give
    ``E`` from ``state``, when ``E`` has ``remaining`` messages yet to hear (see
    :func:`_ungained`)."""
    gains, paths, kept = _ahead(problem, state, i, row, remaining)
    for path in paths:
        for before, after in pairwise(path):
            gains.update(c for c in after if before[c] <= 0)
    return gains - kept


def _ahead(
    problem: _Problem, state: _State, i: int, row: tuple[int, ...], remaining: Counter
) -> tuple[set[tuple], list[list[Counter]], set[tuple]]:
    """Where instance ``i``'s windows (positions ``row``) can still go from ``state``, when
    ``E`` has ``remaining`` messages yet to hear: the captures its windows not started may come
    to hold (a window not started starts at its lowest start or later); for each started
    window, the held counts it passes through, its current ones first (it passes no more
    messages than ``E`` has yet to hear, :func:`_reachable`); and the captures some started
    window holds in all of them."""
    implied: set[tuple] = set()
    paths: list[list[Counter]] = []
    kept: set[tuple] = set()
    for k, (pair, p) in enumerate(zip(problem.pairs[i], row, strict=True)):
        if p < 0:
            implied.update(pair.implies[state.floors[_flat(problem, i, k)]])
            continue
        path = pair.held[p : _reachable(pair, p, remaining) + 1]
        always = set(path[0])
        for held in path[1:]:
            always.intersection_update(held)
        kept |= always
        paths.append(path)
    return implied, paths, kept


def _unlost(problem: _Problem, state: _State, spoken: Counter) -> int | None:
    """The timeline index of a ``-c`` event that no live instance can give ``E`` any more
    from ``state``, if any (a necessary condition: pruning on it loses no explanation).

    The mirror of :func:`_ungained`; ``spoken`` as there. ``E`` hears ``-c`` when an
    instance's count of ``c`` goes from above 0 down to 0, or when it is withdrawn holding
    ``c``: so an instance gives ``-c`` at time ``t`` only if it holds ``c`` then (now, or
    after one of its pairs came to hold ``c``: a window not started starts at its lowest start
    or later, a started one passes no more messages than ``E`` has yet to hear,
    :func:`_reachable`), it was opened by ``t``, and either it was closed by ``t`` (a
    withdrawal) or its count can go down to 0: not while one of its started windows holds
    ``c`` wherever it can still go.
    """
    timeline = problem.timeline
    counts = problem.counts
    assert counts is not None
    remaining = counts.messages[state.idx].copy()
    remaining.subtract(spoken)
    losers = []
    for i, row in enumerate(state.pos):
        if not state.dead[i]:
            inst = problem.instances[i]
            holdable, kept = _holdable(problem, state, i, row, remaining)
            losers.append((inst.opened, inst.closed, holdable, holdable - kept))
    for n in range(state.idx, len(timeline)):
        entry = timeline[n]
        if entry[0] != "e" or entry[2] != "-" or n in state.taken:
            continue
        time, c = entry[1], entry[3]
        if not any(
            opened <= time
            and (c in droppable or (closed is not None and closed <= time and c in holdable))
            for opened, closed, holdable, droppable in losers
        ):
            return n
    return None


def _holdable(
    problem: _Problem, state: _State, i: int, row: tuple[int, ...], remaining: Counter
) -> tuple[set[tuple], set[tuple]]:
    """The captures vectors instance ``i`` (positions ``row``) holds now or may come to hold
    from ``state``, and those it holds wherever its started windows can still go, when ``E``
    has ``remaining`` messages yet to hear (see :func:`_unlost`)."""
    implied, paths, kept = _ahead(problem, state, i, row, remaining)
    holdable = {c for c, n in _view(problem, i, row).items() if n > 0} | implied
    for path in paths:
        for held in path[1:]:
            holdable.update(held)
    return holdable, kept


def _reachable(pair: _Pair, p: int, remaining: Counter) -> int:
    """The last position a window started at ``p`` can reach when ``E`` has ``remaining``
    messages yet to hear: passing a message is hearing it, so it passes no more of them."""
    passed: Counter = Counter()
    while pair.speaks[p] < len(pair.deltas):
        message = pair.speaks[p]
        sent = pair.deltas[message][1]
        if passed[sent] >= remaining[sent]:
            return message
        passed[sent] += 1
        p = message + 1
    return len(pair.deltas)


def _unsent(problem: _Problem, state: _State, spoken: Counter) -> int | None:
    """The timeline index of a ``!`` event that no message left can give ``E`` from
    ``state``, if any (a necessary condition: pruning on it loses no explanation).

    ``spoken``: the ``!`` events of the current turn already explained. Each ``!c`` is one
    message action of a sender that one live instance hears once, in its window: from where
    the window is (or may start) on. And a quiet point cuts the messages as it cuts the
    timeline: every instance open at it has seen every action issued before it (and goes on
    from there), every one closed before it has been withdrawn, and nothing is heard before it
    was issued; so the ``!`` heard between two quiet points come from messages issued between
    them (:func:`_audible`), no more than those.
    """
    counts = problem.counts
    assert counts is not None
    timeline = problem.timeline
    idx = state.idx
    for s, (start, stop, _opening, _closing) in enumerate(counts.stretches):
        if stop <= idx:
            continue
        first = max(start, idx)
        wanted = counts.messages[first] - counts.messages[stop]
        if start <= idx:
            wanted.subtract(spoken)
        if not +wanted:
            continue
        sendable: Counter = Counter()
        for i, row in enumerate(state.pos):
            if not state.dead[i]:
                sendable.update(_audible(problem, state, i, row)[s])
        if any(n > sendable[c] for c, n in wanted.items()):
            for n in range(first, stop):  # the first ! that nothing is left to send
                entry = timeline[n]
                if entry[0] == "e" and entry[2] == "!" and n not in state.taken:
                    sendable[entry[3]] -= 1
                    if sendable[entry[3]] < 0:
                        return n
    return None


def _audible(problem: _Problem, state: _State, i: int, row: tuple[int, ...]) -> list[Counter]:
    """Per stretch of the timeline (:attr:`_Counts.stretches`), the captures of the messages
    instance ``i`` (positions ``row``) may still hear in it from ``state``: those of its
    pairs' actions from where the windows are (or may start) on, issued before the quiet
    point that ends the stretch and, if ``i`` was open at the one that opens it, after that
    one (none if ``i`` was closed before it). Memoised: many states share them."""
    froms = _froms(problem, state, i, row)
    key = (i, froms)
    audible = problem.audible.get(key)
    if audible is None:
        counts = problem.counts
        assert counts is not None
        inst = problem.instances[i]
        audible = []
        for _start, _stop, opening, closing in counts.stretches:
            heard: Counter = Counter()
            audible.append(heard)
            if opening is not None and inst.closed is not None and inst.closed < opening:
                continue  # withdrawn at the quiet point
            for pair, sent, f in zip(problem.pairs[i], counts.sent[i], froms, strict=True):
                times = problem.times[pair.sender]
                lo = f
                if opening is not None and inst.opened < opening:
                    lo = max(lo, bisect.bisect_left(times, opening))
                hi = len(times) if closing is None else bisect.bisect_left(times, closing)
                if lo < hi:
                    heard.update(sent[lo] - sent[hi])
        problem.audible[key] = audible
    return audible


def _owed(problem: _Problem, state: _State, spoken: Counter) -> int | None:
    """The timeline index of a quiet point before which, counting the messages, ``E`` hears
    fewer ``!c`` than the instances must, from ``state``, if any (a necessary condition:
    pruning on it loses no explanation).

    ``spoken``: the ``!`` events of the current turn already explained. An instance open at a
    quiet point has seen every action issued before it, and a window that has started goes on
    from where it is: each matching message in between is one ``!c`` that ``E`` hears before
    the quiet point (a catch-up is silent), and no two of them are the same event; the first
    of them comes after what ``E`` heard from its sender last (per-sender order). The
    messages ahead of a window not yet started may be skipped by a later start.
    """
    counts = problem.counts
    assert counts is not None
    idx = state.idx
    for q, _fixed, _loose, due in counts.quiets:
        if q < idx:
            continue
        owed: Counter = Counter()
        for i, seen in due:
            if state.dead[i]:
                continue
            for pair, sent, p, target in zip(
                problem.pairs[i], counts.sent[i], state.pos[i], seen, strict=True
            ):
                if 0 <= p < target:
                    owed.update(sent[p] - sent[target])
                    first = pair.speaks[p]
                    if first < target and 2 * (first + 1) < state.hwm[pair.sender]:
                        return q  # its message would be heard out of its sender's order
        if owed:
            heard = counts.messages[idx] - counts.messages[q]
            heard.subtract(spoken)
            if any(n > heard[c] for c, n in owed.items()):
                return q
    return None


def _forced(problem: _Problem, state: _State, held: Counter, following: int) -> int | None:
    """The start of a turn whose end :func:`_hopeless`'s counting, sharpened by what the
    instances can still hold, shows cannot be reached from ``state``, if any (a necessary
    condition: pruning on it loses no explanation).

    ``held``: per captures vector, how many live instances hold it at the end of the current
    turn; ``following``: the timeline index of the next turn. A pair's position only grows
    (a window not started starts at its floor or later), so an instance can hold ``c`` from
    now on only where one of its pairs holds ``c`` from there on, and then it also holds
    every vector that pair holds at every such position (:func:`_reach`: ``c`` *brings*
    them). At a turn's end as many live instances hold ``c`` as the counting says: no more
    than can; if exactly as many as can, every one that can holds ``c`` there, and so what
    ``c`` brings. Then each vector must be held by at least as many as are so forced to hold
    it, and each forced instance that does not hold it now has one ``+`` of it heard by then
    (an instance comes to hold a vector only audibly): no more than ``E`` hears in between.
    """
    counts = problem.counts
    assert counts is not None
    reach: dict[int, dict[tuple, frozenset[tuple]]] = {}
    room: Counter = Counter()
    for i, row in enumerate(state.pos):
        if not state.dead[i]:
            reach[i] = _reach(problem, state, i, row)
            room.update(reach[i].keys())
    later = counts.ranges[following]
    if all(held[c] + later.get(c, (0, 0))[1] < n for c, n in room.items()):
        return None  # no count reaches how many instances can hold it: nothing is forced
    sums, gains = counts.sums, counts.gains
    end = counts.ends[state.idx]
    base = sums[end]
    taken = Counter(problem.timeline[n][3] for n in state.taken if problem.timeline[n][2] == "+")
    turns = [(state.idx, end)] + [turn for turn in counts.turns if turn[0] >= following]
    for start, stop in turns:
        musts: dict[tuple, set[int]] = {}
        for c, n in room.items():
            count = held[c] + sums[stop][c] - base[c]
            if count > n:
                return start
            if count == n:
                for i, implied in reach.items():
                    if c in implied:
                        for d in implied[c]:
                            musts.setdefault(d, set()).add(i)
        for d, who in musts.items():
            if len(who) > held[d] + sums[stop][d] - base[d]:
                return start
            gaining = sum(1 for i in who if _view(problem, i, state.pos[i])[d] <= 0)
            if gaining > gains[stop][d] - gains[state.idx][d] - taken[d]:
                return start
    return None


def _reach(
    problem: _Problem, state: _State, i: int, row: tuple[int, ...]
) -> dict[tuple, frozenset[tuple]]:
    """Per captures vector that instance ``i`` (positions ``row``) may hold from ``state`` on,
    the vectors it then surely holds too: the intersection of its pairs' :attr:`_Pair.implies`
    from their positions (or lowest starts) on. Memoised: many states share them."""
    froms = _froms(problem, state, i, row)
    key = (i, froms)
    reach = problem.reach.get(key)
    if reach is None:
        reach = {}
        for pair, f in zip(problem.pairs[i], froms, strict=True):
            for c, implied in pair.implies[f].items():
                reach[c] = reach[c] & implied if c in reach else implied
        problem.reach[key] = reach
    return reach


def _froms(problem: _Problem, state: _State, i: int, row: tuple[int, ...]) -> tuple[int, ...]:
    """Where the pairs of instance ``i`` (positions ``row``) go on from in ``state``: a
    started window from its position, one not started from its lowest start."""
    flat = _flat(problem, i, 0)
    return tuple(p if p >= 0 else state.floors[flat + k] for k, p in enumerate(row))


def _where(problem: _Problem) -> str:
    timeline = problem.timeline
    if problem.best >= len(timeline):
        return "the end"
    entry = timeline[problem.best]
    recent = timeline[max(0, problem.best - 4) : problem.best]
    before = [f"{e[2]}{e[3]!r}" for e in recent if e[0] == "e"]
    if entry[0] == "q":
        cp = entry[2]
        what = "a quiet point" if cp.client is None else f"the sync of {cp.client}"
        return f"{what} at t={entry[1]} (after {', '.join(before) or 'nothing'})"
    return f"{entry[2]}{entry[3]!r} at t={entry[1]} (after {', '.join(before) or 'nothing'})"


def _pair(inst: Instance, j: int, program: list[Action]) -> _Pair | None:
    pattern = inst.pattern
    deltas: list[tuple[Counter, tuple | None]] = []
    held = [Counter()]
    relevant = False
    for action in program:
        delta: Counter = Counter()
        for v in action.adds:
            c = match(pattern, v)
            if c is not None:
                delta[c] += 1
        for v in action.removes:
            c = match(pattern, v)
            if c is not None:
                delta[c] -= 1
        sent = match(pattern, action.message[0]) if action.message else None
        relevant = relevant or bool(delta) or sent is not None
        deltas.append((delta, sent))
        now = held[-1].copy()
        now.update(delta)
        held.append(+now)
    if not relevant:
        return None
    produces: set[tuple[str, tuple]] = set()
    for changes, sent in deltas:
        produces.update((kind, c) for c in changes for kind in "+-")
        if sent is not None:
            produces.add(("!", sent))
    implies: list[dict[tuple, frozenset[tuple]]] = [{}]
    for now in reversed(held):
        here = frozenset(now)
        nxt = dict(implies[-1])
        for c in here:
            nxt[c] = here & nxt[c] if c in nxt else here
        implies.append(nxt)
    implies.reverse()
    speaks = [len(deltas)]
    for n in reversed(range(len(deltas))):
        speaks.append(n if deltas[n][1] is not None else speaks[-1])
    speaks.reverse()
    return _Pair(
        j,
        deltas,
        held,
        0,
        [n for n, (d, sent) in enumerate(deltas) if d or sent is not None],
        produces,
        frozenset(c for _kind, c in produces),
        any(n < 0 for changes, _sent in deltas for n in changes.values()),
        implies[:-1],
        speaks,
    )


def _floor(inst: Instance, sender: object, checkpoints: list[Checkpoint], times: list[int]) -> int:
    """Actions of ``sender`` that surely came before ``inst``'s subscription anywhere."""
    floor = 0
    for cp in checkpoints:
        if cp.time < inst.opened and (cp.client is None or cp.client == sender):
            limit = cp.time if cp.client is None else cp.issued
            floor = max(floor, bisect.bisect_left(times, limit))
    return floor


class _State(NamedTuple):
    """A point of the search; a named tuple, so that making, hashing and comparing one (the
    search does little else) runs in C."""

    idx: int
    """The first event (or checkpoint) of the timeline not yet explained."""
    taken: frozenset[int]
    """Events after ``idx`` in its turn already explained (one turn's events come together)."""
    pos: tuple[tuple[int, ...], ...]
    """Per instance, per pair: -1 before the window starts, else actions seen."""
    floors: tuple[int, ...]
    """Per pair (flattened), the lowest start position still allowed."""
    ceilings: tuple[int, ...]
    """Per pair (flattened), :data:`NO_CEILING`, or the highest start position allowed: the
    window started before a returned sync at a position not yet chosen (so silently)."""
    dead: tuple[bool, ...]
    hwm: tuple[int, ...]
    """Per sender, the order position of the last event heard from it (2k: action k, 2p+1: a
    start at p)."""


class _GaveUp(Exception):
    pass


def _spend(problem: _Problem) -> None:
    """Count one silent state built; give up past :attr:`_Problem.work_budget`."""
    problem.work += 1
    if problem.work > problem.work_budget:
        raise _GaveUp


def _view(problem: _Problem, i: int, pos: tuple[int, ...]) -> Counter:
    """What instance ``i`` holds at positions ``pos`` (per captures vector, its count), read
    only: the same positions recur in many states, so each is summed once."""
    key = (i, pos)
    view = problem.views.get(key)
    if view is None:
        view = Counter()
        for pair, p in zip(problem.pairs[i], pos, strict=True):
            if p >= 0:
                view.update(pair.held[p])
        problem.views[key] = view
    return view


def _search(problem: _Problem, state: _State) -> bool:
    """Whether the rest of the timeline can be explained from ``state``.

    One step is: some unheard (silent) moves of one instance, then a move of that instance
    that gives ``E`` events of the next turn. A silent move changes no captures vector's
    presence, only counts, and only of the vectors its pair touches: it commutes with every
    move of another instance and of a pair touching other vectors, and can always be taken
    later. So only the silent moves of pairs that share a vector with the speaking pair are
    taken just before it speaks (the rest wait for their own turn or a checkpoint's catch-up),
    and a withdrawal (which retracts what is held, the same after any silent move) needs none:
    no explanation is lost and the search stays small.
    """
    if state in problem.visited:
        return False
    problem.visited.add(state)
    if len(problem.visited) > problem.budget:
        raise _GaveUp
    problem.best = max(problem.best, state.idx)
    timeline = problem.timeline
    if state.idx == len(timeline):
        return True
    blocked = _hopeless(problem, state)
    if blocked is not None:
        problem.best = max(problem.best, blocked)
        return False
    entry = timeline[state.idx]
    now = entry[1]
    if entry[0] == "q":
        after = _checkpoint(problem, state, entry[2], now)
        return after is not None and _search(problem, after)
    turn = _turn(timeline, state)
    heard = set(turn.values())
    tries: list[tuple[int, int | None, bool]] = []
    for i in range(len(problem.instances)):
        if heard.isdisjoint(problem.produces[i]):
            continue
        speakers = [k for k, pair in enumerate(problem.pairs[i]) if heard & pair.produces]
        tries.extend((i, k, False) for k in [*speakers, None])
        tries.extend((i, k, True) for k in speakers if problem.pairs[i][k].decrements)
    tries.sort(key=lambda t: t[2])  # every instance's likeliest states before the rest
    for i, k, exhaustive in tries:
        ks, withdraw = ((), True) if k is None else ((k,), False)
        for ready in _ready(problem, state, i, now, k, exhaustive):
            for events, after, _counted in _moves(problem, ready, i, now, ks, withdraw):
                explained = _explained(timeline, state, turn, events)
                if explained is not None and _search(problem, after._replace(**explained)):
                    return True
    return False


def _ready(
    problem: _Problem, state: _State, i: int, now: int, speaker: int | None, exhaustive: bool
):
    """The states from which pair ``speaker`` of instance ``i`` (None: its withdrawal) may
    speak next: the likeliest, or (``exhaustive``) every other.

    Only a decrement's events depend on counts (an increment, a start and a withdrawal on
    which vectors are held, which no silent move changes; a message on nothing): other pairs'
    silent moves matter only before a pair that decrements speaks. The likeliest states are
    those after its own silent moves, and after those and all the others can do unheard
    (where a quiet overlay gets to); the exhaustive ones (which can be many) are tried last.
    """
    if exhaustive:
        linked = problem.linked[i][speaker]  # type: ignore[index]
        yield from _silent_closure(problem, state, i, now, speaker, linked)
        return
    own = _silent_closure(problem, state, i, now, speaker, ())
    yield from own
    if speaker is not None and problem.pairs[i][speaker].decrements:
        others = tuple(k for k in problem.linked[i][speaker] if k != speaker)
        for ready in own:
            yield _settled(problem, ready, i, now, others)


def _settled(problem: _Problem, state: _State, i: int, now: int, ks: tuple[int, ...]) -> _State:
    """``state`` after pairs ``ks`` of instance ``i`` took every silent move that changes
    counts they could, increments first."""
    while True:
        moves = [m for m in _moves(problem, state, i, now, ks, False) if m[2] and not m[0]]
        if not moves:
            return state
        total = sum(_view(problem, i, state.pos[i]).values())
        state = max(moves, key=lambda m: sum(_view(problem, i, m[1].pos[i]).values()) - total)[1]


def _silent_closure(
    problem: _Problem,
    state: _State,
    i: int,
    now: int,
    speaker: int | None,
    linked: tuple[int, ...],
) -> list[_State]:
    """``state`` and every state reachable from it by silent moves of instance ``i``'s pair
    ``speaker``, by those of its ``linked`` pairs that change counts (one that changes none can
    always wait), and by the silent withdrawal of an earlier instance of the same Observe."""
    seen = {state}
    todo = [state]
    others = tuple(k for k in linked if k != speaker)
    previous = problem.instances[i].previous
    while todo:
        current = todo.pop()
        candidates = []
        if speaker is not None:
            candidates += _moves(problem, current, i, now, (speaker,), withdraw=False)
        candidates += [m for m in _moves(problem, current, i, now, others, False) if m[2]]
        if previous is not None:
            candidates += _moves(problem, current, previous, now, (), withdraw=True)
        for events, after, _counted in candidates:
            if not events and after not in seen:
                _spend(problem)
                seen.add(after)
                todo.append(after)
    # Try the states in which the most has happened first: a quiet overlay is where every
    # history ends, and the most likely explanation of a turn.
    return sorted(seen, key=lambda s: sum(map(sum, s.pos)) + sum(s.dead), reverse=True)


def _turn(timeline: list[tuple], state: _State) -> dict[int, tuple[str, tuple]]:
    """The events of the turn in which ``E`` heard event ``state.idx`` not yet explained."""
    now = timeline[state.idx][1]
    turn = {}
    for n in range(state.idx, len(timeline)):
        entry = timeline[n]
        if entry[0] != "e" or entry[1] != now:
            break
        if n not in state.taken:
            turn[n] = (entry[2], entry[3])
    return turn


def _explained(
    timeline: list[tuple], state: _State, turn: dict[int, tuple[str, tuple]], events: Counter
) -> dict | None:
    """``idx`` and ``taken`` once ``events`` are explained, if they are among ``turn``'s
    events (``E`` hears one turn's events at once, so their order in it does not matter)."""
    if not events:
        return None
    wanted = events.copy()
    taken = set(state.taken)
    for n, event in turn.items():
        if wanted[event] > 0:
            wanted[event] -= 1
            taken.add(n)
    if any(wanted.values()):
        return None
    idx = state.idx
    while idx in taken:
        taken.discard(idx)
        idx += 1
    return {"idx": idx, "taken": frozenset(taken)}


def _flat(problem: _Problem, i: int, k: int) -> int:
    return sum(len(row) for row in problem.pairs[:i]) + k


def _moves(problem: _Problem, state: _State, i: int, now: int, ks: tuple[int, ...], withdraw: bool):
    """Every next step at time ``now`` of pairs ``ks`` of instance ``i`` (and its withdrawal if
    ``withdraw``): ``(events it gives E, state after, whether it changes i's counts)``."""
    inst = problem.instances[i]
    if state.dead[i] or inst.opened > now:
        return
    if inst.previous is not None and not state.dead[inst.previous]:
        return
    pos = state.pos[i]
    view = _view(problem, i, pos)
    memo = problem.events
    for k in ks:
        pair = problem.pairs[i][k]
        j = pair.sender
        issued = bisect.bisect_left(problem.times[j], now)
        p = pos[k]
        relevant = pair.relevant
        if p < 0:
            # Every start in a run of actions that do not matter to i gives i the same events:
            # take the run's last position (the least constrained for i's own future), and
            # place what E hears at the earliest point of the run that E's history allows.
            n = _flat(problem, i, k)
            floor, ceiling = state.floors[n], state.ceilings[n]
            last = min(issued, ceiling)
            if last < floor:
                continue
            earliest = floor
            first = bisect.bisect_left(relevant, floor)
            for start in (*relevant[first : bisect.bisect_left(relevant, last)], last):
                key = (i, pos, k, -1 - start)
                events = memo.get(key)
                if events is None:
                    events = memo[key] = _start_events(view, pair.held[start])
                order = max(2 * earliest + 1, state.hwm[j] | 1)  # starts have odd orders
                earliest = start + 1
                if events and (ceiling != NO_CEILING or order > 2 * start + 1):
                    continue  # a start before a returned sync was heard before it
                after = _moved(state, i, k, start, j, order if events else None)
                yield events, after, bool(pair.held[start])
        else:
            r = bisect.bisect_left(relevant, p)  # actions that do not matter to i are skipped
            if r < len(relevant) and relevant[r] < issued:
                action = relevant[r]
                key = (i, pos, k, action)
                events = memo.get(key)
                if events is None:
                    events = memo[key] = _action_events(view, pair.deltas[action])
                order = 2 * (action + 1)
                if events and order < state.hwm[j]:
                    continue
                after = _moved(state, i, k, action + 1, j, order if events else None)
                yield events, after, bool(pair.deltas[action][0])
    if withdraw and inst.closed is not None and inst.closed <= now:
        events = Counter(("-", c) for c, n in view.items() if n > 0)
        yield events, state._replace(dead=(*state.dead[:i], True, *state.dead[i + 1 :])), True


def _moved(state: _State, i: int, k: int, p: int, j: int, order: int | None) -> _State:
    idx, taken, positions, floors, ceilings, dead, hwm = state
    row = positions[i]
    pos = (*positions[:i], (*row[:k], p, *row[k + 1 :]), *positions[i + 1 :])
    if order is not None:
        hwm = (*hwm[:j], order, *hwm[j + 1 :])
    return _State(idx, taken, pos, floors, ceilings, dead, hwm)


def _start_events(view: Counter, held: Counter) -> Counter:
    return Counter(("+", c) for c, n in held.items() if n > 0 and view[c] <= 0)


def _action_events(view: Counter, delta: tuple[Counter, tuple | None]) -> Counter:
    changes, sent = delta
    events: Counter = Counter()
    for c, d in changes.items():
        before = view[c]
        if before <= 0 < before + d:
            events[("+", c)] += 1
        elif before > 0 >= before + d:
            events[("-", c)] += 1
    if sent is not None:
        events[("!", sent)] += 1
    return events


def _checkpoint(problem: _Problem, state: _State, cp: Checkpoint, now: int) -> _State | None:
    """The state after checkpoint ``cp`` if it holds, else None.

    What the checkpoint requires that has not happened yet must be possible silently: windows
    not yet started start as late as allowed, started ones catch up (see :func:`_catch_up`),
    and closed instances holding nothing are withdrawn (at a sync, one that cannot meet it
    may have been withdrawn before; one that can may still be, later, as silently).
    """
    quiet = cp.client is None
    floors = list(state.floors)
    ceilings = list(state.ceilings)
    pos = [list(row) for row in state.pos]
    dead = list(state.dead)
    for i, inst in enumerate(problem.instances):
        if inst.opened >= cp.time or dead[i]:
            continue
        empty = not any(n > 0 for n in _view(problem, i, state.pos[i]).values())
        closed = inst.closed is not None and inst.closed < cp.time
        if quiet and closed and not empty:
            return None  # closed before the quiet point but never withdrawn
        if not (quiet and closed) and _bring_up(problem, i, cp, pos[i], floors, ceilings):
            continue
        if not (closed and empty):
            return None
        dead[i] = True
        pos[i] = list(state.pos[i])
    return state._replace(
        idx=state.idx + 1,
        pos=tuple(tuple(r) for r in pos),
        floors=tuple(floors),
        ceilings=tuple(ceilings),
        dead=tuple(dead),
    )


def _bring_up(
    problem: _Problem,
    i: int,
    cp: Checkpoint,
    pos: list[int],
    floors: list[int],
    ceilings: list[int],
) -> bool:
    """Bring instance ``i`` (positions ``pos``) to what ``cp`` requires, if it can be done
    unheard; updates ``pos``, ``floors`` and ``ceilings`` only if it can."""
    quiet = cp.client is None
    inst = problem.instances[i]
    whole = quiet or (inst.opener == cp.client and inst.opened < cp.issued)
    before = tuple(pos)
    row = list(pos)
    bounds: dict[int, tuple[int, int]] = {}
    targets: dict[int, int] = {}
    for k, pair in enumerate(problem.pairs[i]):
        caller = problem.senders[pair.sender] == cp.client
        if not (whole or caller):
            continue
        n = _flat(problem, i, k)
        times = problem.times[pair.sender]
        target = bisect.bisect_left(times, cp.issued if caller else cp.time)
        lo, hi = floors[n], ceilings[n]
        # A quiet point, and a sync for its caller's earlier actions, bring a window up to
        # date. A sync starts the windows of its caller's earlier observations with every
        # sender somewhere before it returned, at a place the search picks later (silently).
        if row[k] < 0 and (quiet or caller) and hi < target:
            row[k] = hi  # started before an earlier sync: now it has caught up
            targets[k] = target
        elif row[k] < 0 and quiet:
            row[k] = max(target, lo)
        elif row[k] < 0 and whole:
            hi = min(hi, bisect.bisect_left(times, cp.time))
            lo = max(lo, target) if caller else lo
        elif row[k] < 0:
            lo = max(lo, target)  # starting later, it starts after the caller's actions
        elif (quiet or caller) and row[k] < target:
            targets[k] = target
        if hi < lo:
            return False
        bounds[n] = (lo, hi)
    if not _silent(_view(problem, i, before), _view(problem, i, tuple(row))):
        return False
    if targets and not _catch_up(problem, i, row, targets, _helpers(problem, i, cp, row, targets)):
        return False
    pos[:] = row
    for n, (lo, hi) in bounds.items():
        floors[n], ceilings[n] = lo, hi
    return True


def _helpers(
    problem: _Problem, i: int, cp: Checkpoint, pos: list[int], targets: dict[int, int]
) -> dict[int, int]:
    """At a sync, the pairs of instance ``i`` not brought up to date whose window has started,
    with how far they may go (their actions issued before the sync returned): their silent
    steps may come before the caller's (another sender replacing a match the caller withdraws).
    At a quiet point every pair is brought up to date: none."""
    if cp.client is None:
        return {}
    helpers = {}
    for k, pair in enumerate(problem.pairs[i]):
        if k not in targets and pos[k] >= 0:
            bound = bisect.bisect_left(problem.times[pair.sender], cp.time)
            if pos[k] < bound:
                helpers[k] = bound
    return helpers


def _catch_up(
    problem: _Problem,
    i: int,
    pos: list[int],
    targets: dict[int, int],
    helpers: dict[int, int] | None = None,
) -> bool:
    """Advance pairs ``k`` of instance ``i`` to ``targets[k]`` unheard, if some order allows
    (then ``pos`` holds the targets); pairs ``k`` of ``helpers`` may take silent steps up to
    ``helpers[k]`` on the way if it cannot be done without (their steps tried after the targets').

    A depth-first search over the orders of the pairs' actions, memoised on the positions
    (they decide the counts): an action may come next if it changes nothing ``E`` can see (no
    message, no count crossing zero). One that only adds is taken at once, without trying the
    others first: taken earlier it only raises counts, which makes no other action heard. The
    others are tried in every order: a retraction taken too early can leave a count at zero
    for another sender's (one sender withdrawing its match before another replaced its own).
    """
    if _catch_up_with(problem, i, pos, targets, {}):
        return True
    return bool(helpers) and _catch_up_with(problem, i, pos, targets, helpers)


def _catch_up_with(
    problem: _Problem, i: int, pos: list[int], targets: dict[int, int], helpers: dict[int, int]
) -> bool:
    """:func:`_catch_up`, the helpers' steps tried after the targets' ones."""
    pairs = problem.pairs[i]
    ks = [*targets, *helpers]
    ends = (*(targets[k] for k in targets), *(helpers[k] for k in helpers))
    count = len(targets)
    goal = ends[:count]
    start = tuple(pos[k] for k in ks)
    seen = {start}
    todo = [(start, Counter(_view(problem, i, tuple(pos))))]  # a copy: views are read only
    while todo:
        at, view = todo.pop()
        if at[:count] == goal:
            for n, k in enumerate(ks):
                pos[k] = at[n]
            return True
        steps = []
        for n, k in enumerate(ks):
            if at[n] == ends[n]:
                continue
            delta = pairs[k].deltas[at[n]]
            changes = delta[0]
            if _action_events(view, delta):
                continue
            if n < count and all(d > 0 for d in changes.values()):
                steps = [(n, changes)]
                break
            steps.append((n, changes))
        for n, changes in reversed(steps):  # the first found is tried first
            nxt = (*at[:n], at[n] + 1, *at[n + 1 :])
            if nxt not in seen:
                _spend(problem)
                seen.add(nxt)
                after = view.copy()
                after.update(changes)
                todo.append((nxt, after))
    return False


def _silent(before: Counter, after: Counter) -> bool:
    """Whether moving an instance's counts from ``before`` to ``after`` can go unheard.

    Applying every increase before any decrease changes no count's sign on the way unless the
    start and end differ in which captures are held.
    """
    held_before = {c for c, n in before.items() if n > 0}
    held_after = {c for c, n in after.items() if n > 0}
    return held_before == held_after
