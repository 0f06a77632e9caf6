"""The simulator: real nodes and protocols over counted virtual links, in virtual time.

:func:`simulate` runs one workload on one topology with one protocol and returns a
:class:`SimResult` (link traffic per direction, node state, delivery latency, the Steiner lower
bound, transparency violations). ``feds simulate`` is its command line. The nodes, relays and
protocols are the ones ``feds node`` runs (DESIGN.md: a sans-IO core); only the transport is
virtual (:mod:`feds.sim.network`).

    from feds.sim import WorkloadSpec, simulate
    from feds.topology import generate

    result = simulate(generate("balanced:k=2,depth=3", base_port=0), "aggregate-subs",
                      WorkloadSpec(events=500), seed=1)
    print(result.summary()["events_per_bound"])
"""

from feds.sim.network import LinkParams
from feds.sim.results import SimResult, write_outputs
from feds.sim.runner import TransparencyError, simulate
from feds.sim.workload import Plan, WorkloadError, WorkloadSpec, load_workload, plan

__all__ = [
    "LinkParams",
    "Plan",
    "SimResult",
    "TransparencyError",
    "WorkloadError",
    "WorkloadSpec",
    "load_workload",
    "plan",
    "simulate",
    "write_outputs",
]
