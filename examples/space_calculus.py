"""The space calculus's Producer/Transformer/Consumer (Orzan and van de Pol, Fig. 4) on feds.

A Producer at A1 writes two observations <1, value, timestamp>; a Transformer at A2 reads them
(through an eager link with Splice's overwrite policy: key field 1, timestamp field 3) and writes
<2, value+1, timestamp>; a Consumer at A3 reads those. The paper asks whether replicating the
Transformer (a second one at A4) changes what the Consumer can see. This script runs both
configurations under many random interleavings and prints what the Consumer saw in each; the
last line says whether the two sets agree (they must: the replication is transparent).

Run: ``python examples/space_calculus.py``
"""

from __future__ import annotations

import random
from collections import Counter

from feds.spaces import ANY
from feds.spaces.calculus import Agent, Network, Op, run

SCHEDULES = 200


def producer():
    itsp = 0
    yield Op("ext", "in")
    yield Op("write", (1, 0, itsp))
    itsp += 1
    yield Op("write", (1, 1, itsp))


def transformer():
    while True:
        x = yield Op("read", (1, ANY, ANY))
        # ivx := x/2+1; itx := x/3 (x/n projects field n, counted from 1)
        yield Op("write", (2, x[1] + 1, x[2]))


def consumer(seen: list):
    last = None
    while not seen or seen[-1][2] < 1:  # until it has seen the freshest observation
        x = yield Op("read", (2, ANY, ANY))
        if x != last:
            seen.append(x)
            yield Op("ext", ("out", x))
        last = x


def network(replicated: bool) -> Network:
    net = Network()
    for name in ("A1", "A2", "A3", *(["A4"] if replicated else [])):
        net.space(name)
    net.publish("A1", (1, ANY, ANY))  # A1 -> <1,*,*>
    net.publish("A2", (2, ANY, ANY))  # A2 -> <2,*,*>
    net.subscribe("A2", (1, ANY, ANY), key=[0], timestamp=2)  # A2 <- <1,*,*> 1 3
    net.subscribe("A3", (2, ANY, ANY), key=[0], timestamp=2)  # A3 <- <2,*,*> 1 3
    if replicated:
        net.publish("A4", (2, ANY, ANY))
        net.subscribe("A4", (1, ANY, ANY), key=[0], timestamp=2)
    return net


def outcomes(replicated: bool) -> Counter:
    found: Counter = Counter()
    for seed in range(SCHEDULES):
        net, seen = network(replicated), []
        agents = [
            Agent("Producer", "A1", producer()),
            Agent("Transformer", "A2", transformer()),
            Agent("Consumer", "A3", consumer(seen)),
        ]
        if replicated:
            agents.append(Agent("Transformer2", "A4", transformer()))
        run(net, agents, random.Random(seed).choice, until=lambda a=agents[2]: a.done)
        assert agents[2].done, f"the consumer never saw the freshest item (seed {seed})"
        found[tuple(seen)] += 1
    return found


def main() -> int:
    results = {}
    for replicated in (False, True):
        label = "two transformers" if replicated else "one transformer"
        results[replicated] = found = outcomes(replicated)
        for seen, count in sorted(found.items()):
            print(f"{label}: consumer saw {' then '.join(map(str, seen))} in {count} schedules")
    same = set(results[False]) == set(results[True])
    verdict = "the consumer saw the same" if same else "the consumer saw DIFFERENT"
    print(f"one transformer and two transformers: {verdict} sequences over {SCHEDULES} schedules")
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
