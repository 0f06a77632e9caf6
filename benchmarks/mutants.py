"""Mutation check of the protocol and sync code: does the fast suite kill each mutant?

Each mutant is one small, deliberate bug in ``feds/protocols/*``, ``feds/node.py`` (federated sync,
local access), ``feds/dataspace.py`` or the message routes (``feds/routes.py``, where
``feds/actor.py`` drops them, and the relay passing a lone message on as its bytes) — dropping a ≠
condition, not retracting on unobserve, delivering twice, answering a sync early, … For each, the
script copies the worktree's ``feds/``, ``tests/`` and the files the tests read (``topology/``,
``protocols/``) to a temporary directory, applies the mutant there (the worktree is never touched),
runs the fast tests that cover that code against the copy, and reports whether they failed
(*killed*) or passed (*survived*). A mutant whose text no longer occurs in the source is reported
as *stale* (update its snippet). A mutant shown to be *equivalent* under the current design (its
``equivalent`` says why; ``docs/protocols.md`` has the argument) is still run: if it survives it is
reported as *equivalent*, and if a change of design makes the tests kill it, as killed.

    .venv/bin/python benchmarks/mutants.py            # every mutant, about 55 minutes
    .venv/bin/python benchmarks/mutants.py --list     # names only
    .venv/bin/python benchmarks/mutants.py sync-leaf-answers-unflushed flood-split-horizon

The kill rate and the list are kept in ``docs/protocols.md``; every mutant listed there must be
killed or shown equivalent. Exit status 1 if one that is not equivalent survives, or one is stale.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TESTS = [
    "tests/test_sync.py",
    "tests/test_message_path.py",
    "tests/test_event_order.py",
    "tests/test_protocol_schemas.py",
    "tests/test_federation.py",
    "tests/test_routes.py",
    "tests/test_inline_steps.py",
    "tests/test_match_taker.py",
    "tests/test_untracked_holders.py",
    "tests/test_relay.py",
    "tests/test_relay_cache.py",
]
"""The fast tests that cover the protocol and sync code (and the routes that stand for it, and
the relay that carries it)."""
TIMEOUT = 900
"""Seconds one mutant's test run may take (a mutant that makes the overlay hang is killed)."""


@dataclass(frozen=True)
class Mutant:
    name: str
    path: str
    old: str
    new: str
    what: str
    equivalent: str = ""
    """Why no test can kill it under the current design (empty: a test must)."""


MUTANTS = [
    # -- copy-up --------------------------------------------------------------------------
    Mutant(
        "copy-up-split-horizon",
        "feds/protocols/copy_up.py",
        "if i is not LOCAL_ID and i == link_id:",
        "if False:",
        "copy-up answers an Observe with data from the link it came from (drops i ≠ f)",
    ),
    Mutant(
        "copy-up-no-message-up",
        "feds/protocols/copy_up.py",
        "        if self.parent is not None:\n            turn.message(",
        "        if False:\n            turn.message(",
        "copy-up never sends a message up to the parent",
    ),
    Mutant(
        "copy-up-copies-observes",
        "feds/protocols/copy_up.py",
        "return None if _is_observe(c[0]) else c[0]",
        "return c[0]",
        "copy-up offers Observe assertions to the parent as content too",
    ),
    Mutant(
        "copy-up-no-uplink",
        "feds/protocols/copy_up.py",
        "        if peer_is_parent:\n",
        "        if False:\n",
        "copy-up's uplink relays no content to the parent",
    ),
    Mutant(
        "copy-up-inbox-label",
        "feds/protocols/copy_up.py",
        "lambda v: (F, Record(LINK, (child, v)))",
        "lambda v: (F, Record(LINK, (F, v)))",
        "a copy-up inbox labels what a child offers with the parent's fragment, not the child's",
    ),
    # -- observer-flood -------------------------------------------------------------------
    Mutant(
        "flood-split-horizon",
        "feds/protocols/observer_flood.py",
        "return None if source == b else (b, Record(FROM, (a, observe(pat, e))))",
        "return (b, Record(FROM, (a, observe(pat, e))))",
        "observer-flood floods an Observe back to the neighbour it came from (drops f ≠ b)",
    ),
    Mutant(
        "flood-answers-every-fragment",
        "feds/protocols/observer_flood.py",
        "local_matches = rec_group(FROM, [lit(f), pat])",
        "local_matches = rec_group(FROM, [DISCARD, pat])",
        "observer-flood answers with every assertion in the fragment, not only local ones",
    ),
    Mutant(
        "flood-delivers-twice",
        "feds/protocols/observer_flood.py",
        "            relay(t, f, rec_group(AT, [lit(e), bind()]), lambda c: (observer, c[0]))\n",
        "            relay(t, f, rec_group(AT, [lit(e), bind()]), lambda c: (observer, c[0]))\n"
        "            relay(t, f, rec_group(AT, [lit(e), bind()]), lambda c: (observer, c[0]))\n",
        "observer-flood delivers each <at e x> to a local observer twice",
    ),
    Mutant(
        "flood-no-mirror",
        "feds/protocols/observer_flood.py",
        "            if source == b:\n                return\n            relay(t, b,",
        "            if source is not None:\n                return\n            relay(t, b,",
        "observer-flood mirrors no answers back across a link",
    ),
    Mutant(
        "flood-mirror-horizon",
        "feds/protocols/observer_flood.py",
        "            if source == b:\n                return\n            relay(t, b,",
        "            relay(t, b,",
        "observer-flood also mirrors answers toward the side the observer came from (drops s ≠ b)",
    ),
    Mutant(
        "aggregate-next-hop-horizon",
        "feds/protocols/aggregate_subs.py",
        "lambda c: None if c[0] == hop else",
        "lambda c: None if c[0] is None else",
        "aggregate-subs relays a <pub> back to the hop it came from (drops a ≠ t)",
    ),
    Mutant(
        "aggregate-link-horizon",
        "feds/protocols/aggregate_subs.py",
        "lambda c: None if c[0] in outside else c[1]",
        "lambda c: None if c[0] == a else c[1]",
        "aggregate-subs asks b for a pattern that b itself subscribed (drops s ≠ b)",
    ),
    Mutant(
        "aggregate-self-hop",
        "feds/protocols/aggregate_subs.py",
        "            if hop == f:\n                return\n",
        "",
        "aggregate-subs also relays <pub> to its own fragment as a next hop (drops t ≠ f)",
    ),
    Mutant(
        "aggregate-inbox-hop",
        "feds/protocols/aggregate_subs.py",
        "lambda x: (a, Record(PUB, (b, pat, x)))",
        "lambda x: (a, Record(PUB, (a, pat, x)))",
        "an aggregate-subs inbox labels what it receives with its own fragment, not the neighbour",
    ),
    Mutant(
        "aggregate-no-local-pub",
        "feds/protocols/aggregate_subs.py",
        "deliver(t, f, rec_group(LOCAL, [pat]), at, lambda vs: (inbox, vs))",
        "pass",
        "aggregate-subs forwards no local matches to a next hop",
    ),
    # -- the dataspace and local access -----------------------------------------------------
    Mutant(
        "unobserve-keeps-matches",
        "feds/dataspace.py",
        "                turn.actor.routes = None  # messages no longer reach this observer\n"
        "                observer.withdraw(turn)\n",
        "                turn.actor.routes = None  # messages no longer reach this observer\n",
        "retracting an Observe does not retract what it published (not retracting on unobserve)",
    ),
    Mutant(
        "taker-keeps-matches-on-unobserve",
        "feds/dataspace.py",
        "            self.taker.unmatch_all(turn)\n",
        "            pass\n",
        "a match taker's Observe withdrawn while its facet lives, it keeps what it made",
    ),
    Mutant(
        "taker-shown-after-its-facet-stopped",
        "feds/dataspace.py",
        "        facet = ref.facet\n        if not facet.alive:\n            return\n",
        "        facet = ref.facet\n",
        "a match taker whose facet stopped is still shown matches",
    ),
    Mutant(
        "taker-keyed-by-raw-captures",
        "feds/dataspace.py",
        "self.taker.matched(turn, captures, exact_key(captures) if key is None else key)",
        "self.taker.matched(turn, captures, captures if key is None else key)",
        "a match taker's key is the raw captures: (1,) and (#t,) share one",
    ),
    Mutant(
        "taker-twice",
        "feds/dataspace.py",
        "            if not inline or entity.taking:\n",
        "            if not inline:\n",
        "a second Observe of a match taker shows it matches by key too (keys shared)",
    ),
    Mutant(
        "delivery-stop-keeps-taken",
        "feds/protocols/__init__.py",
        "    turn.on_stop(entity.unmatch_all)\n",
        "",
        "a delivery whose facet stops keeps in its sink what it made of its matches",
    ),
    Mutant(
        "untracked-kept-on-crash",
        "feds/actor.py",
        "        actor.exit_hooks.append(_withdraw_held)\n",
        "",
        "what a crashed node asserted untracked at other actors stays there",
    ),
    Mutant(
        "relay-stop-keeps-assertions",
        "feds/reactive.py",
        "    turn.on_stop(entity.withdraw)\n",
        "",
        "an assertion relay whose facet stops keeps what it asserted untracked",
    ),
    Mutant(
        "relay-kept-on-crash",
        "feds/reactive.py",
        "    hold_untracked(turn.actor, entity)\n",
        "",
        "a crashed node's assertion relays keep what they asserted untracked at other actors",
    ),
    Mutant(
        "dataspace-captures-kept-on-crash",
        "feds/dataspace.py",
        "            hold_untracked(turn.actor, self)\n",
        "",
        "a crashed node's dataspace keeps what it showed observers of other actors",
    ),
    Mutant(
        "dataspace-stop-withdraws-inline-only",
        "feds/dataspace.py",
        "            observer.withdraw(turn)\n\n    def held_elsewhere",
        "            if observer.inline:\n                observer.withdraw(turn)\n\n"
        "    def held_elsewhere",
        "a dataspace whose facet stops keeps what it showed observers of other actors",
    ),
    Mutant(
        "offers-kept-when-the-uplink-goes",
        "feds/protocols/copy_up.py",
        "                turn.retract_untracked(self.parent, entry[1])  # type: ignore[arg-type]\n"
        "                entry[1] = None\n",
        "                entry[1] = None\n",
        "copy-up's offers stay at the parent when the uplink goes",
    ),
    Mutant(
        "deliveries-retracted-at-first-asker",
        "feds/protocols/__init__.py",
        "            entry[0] -= 1\n        else:\n            del self.held[key]\n",
        "            entry[0] -= 1\n        if True:\n            self.held.pop(key, None)\n",
        "a delivery two rules ask for goes when the first of them goes",
    ),
    Mutant(
        "taker-not-free-again",
        "feds/dataspace.py",
        "                    observer.taker.taking = False  # free to be observed again\n",
        "",
        "a match taker whose Observe went is refused a new one",
    ),
    Mutant(
        "access-keeps-retracted",
        "feds/node.py",
        "        mine, observed = entry\n        turn.retract(mine)\n",
        "        mine, observed = entry\n",
        "local access never retracts from the fragment",
    ),
    Mutant(
        "sync-leaf-answers-unflushed",
        "feds/node.py",
        "            if not others:\n                self.local_flush(t, then)\n",
        "            if not others:\n                then(t)\n",
        "a leaf answers a sync wave without flushing its own pending work",
        "the leaf's flush runs in the turn in which its first flush found no new work",
    ),
    Mutant(
        "sync-no-first-flush",
        "feds/node.py",
        "        self.local_flush(turn, flood)\n",
        "        flood(turn)\n",
        "a node floods the sync wave before flushing its own pending work",
        "a leaf's own flush and every other node's last flush cover what it would",
    ),
    Mutant(
        "sync-no-last-flush",
        "feds/node.py",
        "                        self.fsync_waits.get(service, set()).discard(once)\n"
        "                    self.local_flush(t, then)\n",
        "                        self.fsync_waits.get(service, set()).discard(once)\n"
        "                    then(t)\n",
        "a node answers once its neighbours did, without flushing what their answers brought",
        "what answers bring on is already sent, or is for the caller, queued before its answer",
    ),
    Mutant(
        "sync-first-reply",
        "feds/node.py",
        "                if waiting == 0:\n",
        "                if waiting == len(others) - 1:\n",
        "a node answers a sync wave at its first neighbour's answer, not the last",
    ),
    Mutant(
        "sync-one-round-flush",
        "feds/node.py",
        "            if actor.work == mark:\n",
        "            if True:\n",
        "a local flush ends after one round even if that round brought new work",
        "what the caller's actions cause in a node is queued before the round's sync request",
    ),
    Mutant(
        "sync-no-flush",
        "feds/node.py",
        "        turn.sync(self.fragment, check)\n",
        "        then(turn)\n",
        "a local flush runs its continuation at once, without syncing the node's actor",
    ),
    Mutant(
        "sync-relay-answers-early",
        "feds/node.py",
        "            self.node.federated_sync(turn, sender, lambda t: t.message(reply, True))\n",
        "            turn.message(reply, True)\n",
        "a node answers a neighbour's sync request at once, without a wave of its own",
    ),
    # -- a relay's runs of assertions ---------------------------------------------------------
    Mutant(
        "asserts-run-keeps-no-references",
        "feds/relay.py",
        "encode_all(items, limit, lambda: not lifted)",
        "encode_all(items, limit)",
        "a run of assertions that lifts references is encoded together, and none of them keeps"
        " the references it mentions",
    ),
    Mutant(
        "rejected-run-keeps-definitions",
        "feds/codec.py",
        "            and (accept is None or accept())\n        ):",
        "        ):\n            if not (accept is None or accept()):\n"
        "                self._defined.clear()\n                return None",
        "a run its caller refuses (it lifted a reference) keeps the cache definitions it made,"
        " which the far side never receives",
    ),
    Mutant(
        "changes-packet-any-actor",
        "feds/relay.py",
        "chain(refs, map(_third, kept))))\n        if len(targets) != 1:",
        "chain(refs, map(_third, kept))))\n        if len(targets) > 2:",
        "a packet of changes for two actors is queued as one actor's batch",
    ),
    Mutant(
        "changes-packet-late-retracted",
        "feds/relay.py",
        "None in kept or _DROPPED in kept or any(map(_second, kept))",
        "None in kept or any(map(_second, kept))",
        "a packet of changes retracting an assertion dropped as late takes the fast path",
    ),
    Mutant(
        "changes-packet-handle-reused",
        "feds/relay.py",
        "            or not far.keys().isdisjoint(new)\n",
        "",
        "a packet of changes may assert a handle that is live",
    ),
    Mutant(
        "changes-packet-no-handle-limit",
        "feds/relay.py",
        "            or len(far) + k > self.max_handles\n",
        "",
        "a packet of changes may take the far side past its live handles' bound",
    ),
    # -- message routes ---------------------------------------------------------------------
    Mutant(
        "routes-kept-after-impure-event",
        "feds/actor.py",
        "            if actor.routes is not None and not pure_only(batch):\n",
        "            if False:\n",
        "an actor keeps its routes when an entity that is not pure handles an event",
    ),
    Mutant(
        "routes-kept-after-impure-inline-event",
        "feds/actor.py",
        "            if not ref.pure:  # it may change what a route stands for\n"
        "                self.actor.routes = None\n            saved = self.facet\n",
        "            saved = self.facet\n",
        "an actor keeps its routes when an inline step that is not pure hears an assertion",
    ),
    Mutant(
        "routes-kept-after-new-observer",
        "feds/dataspace.py",
        "        turn.actor.routes = None  # a message may now reach this observer too\n",
        "",
        "a dataspace keeps its actor's routes when it gains an observer",
    ),
    Mutant(
        "routes-kept-after-observer-goes",
        "feds/dataspace.py",
        "                turn.actor.routes = None  # messages no longer reach this observer\n",
        "",
        "a dataspace keeps its actor's routes when it loses an observer",
    ),
    Mutant(
        "routes-kept-after-new-facet",
        "feds/actor.py",
        "        self.actor.routes = None  # what it sets up may take part in a route\n",
        "",
        "an actor keeps its routes when a facet is created",
    ),
    Mutant(
        "routes-kept-after-stop",
        "feds/actor.py",
        "            self.actor.routes = None  # a route may pass through a facet that stops\n",
        "",
        "an actor keeps its routes when a facet stops",
    ),
    Mutant(
        "routes-kept-after-action",
        "feds/actor.py",
        "        actor.routes = None  # it may do anything\n",
        "        pass\n",
        "an actor keeps its message routes across an action turn",
    ),
    Mutant(
        "routes-kept-after-impure-step",
        "feds/actor.py",
        "                if not ref.pure:  # it may change what a route stands for\n"
        "                    self.actor.routes = None\n",
        "",
        "an actor keeps its routes when a message reaches a step that is not pure",
    ),
    Mutant(
        "routes-while-queued",
        "feds/routes.py",
        "    if len(batches) != 1 or scheduler.running or scheduler._queue or scheduler._open:\n",
        "    if len(batches) != 1 or scheduler.running:\n",
        "a route is followed while turns are queued, overtaking them",
    ),
    Mutant(
        "routes-stages-reversed",
        "feds/routes.py",
        "    for k in range(depth):\n",
        "    for k in reversed(range(depth)):\n",
        "a route sends what later turns would send before what earlier ones would",
    ),
    Mutant(
        "routes-no-length-guard",
        "feds/witness.py",
        "        trace.note(path, LENGTH, len(items))\n",
        "",
        "a route holds for sequences and records of any length once it took a part of one",
    ),
    Mutant(
        "routes-no-value-guard",
        "feds/witness.py",
        '    _get(w, "_trace").note(_get(w, "_path"), VALUE, value)\n',
        "",
        "a route holds for any value once it compared or hashed a part of the payload",
    ),
    Mutant(
        "routes-self-batch-behind",
        "feds/routes.py",
        "                        if kind != MESSAGE or not ref.entity.prompt:\n",
        "                        if kind != MESSAGE:\n",
        "a route stands for a batch to its own actor that is queued behind other work",
    ),
    Mutant(
        "routes-single-whole-payload",
        "feds/routes.py",
        "            scheduler.send(actor, {target: [(MESSAGE, to, found[1][i], None)]})\n",
        "            scheduler.send(actor, {target: [(MESSAGE, to, found[1], None)]})\n",
        "a lone message's one-send route sends all the values it made, not the one it names",
    ),
    Mutant(
        "inline-captures-to-stopped-step",
        "feds/actor.py",
        "        facet = ref.facet\n        if facet.alive:\n"
        "            if not ref.pure:  # it may change what a route stands for\n",
        "        facet = ref.facet\n        if True:\n"
        "            if not ref.pure:  # it may change what a route stands for\n",
        "a dataspace shows an inline rule step in a stopped facet its captures",
    ),
    Mutant(
        "routes-record-inline-captures",
        "feds/routes.py",
        "    publish_inline = retract_inline = _refuse  # assertions, past the dispatch\n",
        "",
        "a route's recording turn lets a step show an inline step an assertion",
    ),
    Mutant(
        "pass-on-ext-types",
        "feds/codec.py",
        '    "ext_hook": _not_plain,\n',
        "",
        "a relay passes on as bytes a message holding ext types (symbols, records, cached slots)",
    ),
    Mutant(
        "pass-on-any-depth",
        "feds/codec.py",
        "        if size > self._plain_max or _containers(data) > self._max_depth - depth:\n",
        "        if size > self._plain_max:\n",
        "a relay passes on as bytes a message nested deeper than the far side accepts",
    ),
    Mutant(
        "pass-on-while-queued",
        "feds/relay.py",
        "            or scheduler._queue\n",
        "",
        "a relay passes a lone message on as bytes ahead of work queued before it came",
    ),
    Mutant(
        "pass-on-guarded-route",
        "feds/relay.py",
        "        if route.select is not None:  # it takes the fields of records of one label"
        " and arity\n",
        "        if False:\n",
        "a relay passes on as it came a message whose route looked at it (and rebuilds it)",
    ),
    Mutant(
        "pass-on-other-records",
        "feds/relay.py",
        "            if not payload.startswith(prefix):  # another payload, or one a cache holds\n"
        "                return False\n",
        "",
        "a relay passes on as its fields any payload to a route of a record's fields",
    ),
    Mutant(
        "fields-route-any-guards",
        "feds/routes.py",
        "        len(guards) != 3\n        or ",
        "        ",
        "a route that looked at a constant too is taken for a route of a record's fields",
    ),
    Mutant(
        "lone-message-any-oid",
        "feds/relay.py",
        "        if oid >= self._membrane.next_oid:  # never allocated here\n"
        "            raise _bare_event_error((oid, value))\n",
        "",
        "a packet of one message to an oid never given is dropped as late, not refused",
    ),
]


def run(mutant: Mutant, python: str) -> tuple[str, float, str]:
    """``(outcome, seconds, last lines of output)`` for one mutant."""
    source = (ROOT / mutant.path).read_text()
    if source.count(mutant.old) != 1:
        return "stale", 0.0, f"{mutant.path}: the snippet occurs {source.count(mutant.old)} times"
    with tempfile.TemporaryDirectory(prefix=f"mutant-{mutant.name}-") as tmp:
        work = Path(tmp)
        for part in ("feds", "tests", "topology", "protocols"):  # files the tests read
            shutil.copytree(ROOT / part, work / part, ignore=shutil.ignore_patterns("__pycache__"))
        shutil.copy(ROOT / "pyproject.toml", work / "pyproject.toml")
        (work / mutant.path).write_text(source.replace(mutant.old, mutant.new))
        env = {**os.environ, "PYTHONPATH": str(work), "PYTHONDONTWRITEBYTECODE": "1"}
        env.pop("FEDS_PROPERTY_EXAMPLES", None)
        cmd = [python, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", *TESTS]
        started = time.perf_counter()
        try:
            done = subprocess.run(
                cmd, cwd=work, env=env, capture_output=True, text=True, timeout=TIMEOUT
            )
        except subprocess.TimeoutExpired:
            return "killed", time.perf_counter() - started, f"timed out after {TIMEOUT} s"
        seconds = time.perf_counter() - started
        lines = (done.stdout + done.stderr).strip().splitlines()
        if done.returncode == 0:
            return "survived", seconds, "\n".join(lines[-3:])
        summary = ("FAILED ", "ERROR tests/")  # not a captured log line ("ERROR    feds.…")
        failed = [line.split(" - ")[0] for line in lines if line.startswith(summary)]
        return "killed", seconds, (failed or lines[-1:])[0]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="*", help="mutants to run (default: all)")
    parser.add_argument("--list", action="store_true", help="list the mutants and exit")
    args = parser.parse_args(argv)
    if args.list:
        for m in MUTANTS:
            print(f"{m.name:32} {m.path:34} {m.what}")
        return 0
    unknown = set(args.names) - {m.name for m in MUTANTS}
    if unknown:
        parser.error(f"unknown mutants: {', '.join(sorted(unknown))} (see --list)")
    chosen = [m for m in MUTANTS if not args.names or m.name in args.names]
    outcomes = []
    for m in chosen:
        outcome, seconds, tail = run(m, sys.executable)
        if outcome == "survived" and m.equivalent:
            outcome, tail = "equivalent", f"{m.equivalent}\n{tail}"
        outcomes.append(outcome)
        print(f"{outcome:10} {seconds:6.1f}s  {m.name}: {m.what}", flush=True)
        print("           " + tail.replace("\n", "\n           "), flush=True)
    killed, equivalent = outcomes.count("killed"), outcomes.count("equivalent")
    tested = len(chosen) - equivalent
    print(
        f"killed {killed} of {tested} ({100 * killed / max(1, tested):.0f}%)"
        f", and {equivalent} equivalent"
    )
    return 0 if killed == tested else 1


if __name__ == "__main__":
    sys.exit(main())
