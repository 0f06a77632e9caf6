"""A node serving the spaces its topology declares, behind its gates (the trio edge).

``feds node`` and ``feds up`` start :func:`serve_node_gates` next to each node that has
``gates`` in the topology file (:mod:`feds.spaces.topology_spaces`): one repository per node
with every declared space (a member of each federated space, through the node's own fragment;
a fresh local space of each local kind) behind each of the node's gates. Cancelling it closes
the gates and their connections.
"""

from __future__ import annotations

import trio

from feds.driver import Driver
from feds.runtime import NodeRuntime
from feds.spaces.gate import Gate, SpaceRepository
from feds.spaces.hosting import FederatedSpace
from feds.spaces.space import Space
from feds.spaces.store import Kind
from feds.spaces.topology_spaces import FEDERATED, TopologySpaces


def listing(declared: TopologySpaces) -> str:
    """``NAME(KIND) ...``: the spaces behind every gate, as the CLI prints them."""
    return " ".join(f"{name}({kind})" for name, kind in declared.spaces.items())


async def serve_node_gates(
    runtime: NodeRuntime,
    driver: Driver,
    declared: TopologySpaces,
    gate_uris: tuple[str, ...],
    *,
    task_status: trio.TaskStatus[list[Gate]] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve ``declared``'s spaces at ``runtime``'s node behind ``gate_uris`` until cancelled;
    ``task_status`` gets the gates once they all listen (their ``uri`` has the bound port)."""
    async with SpaceRepository() as repo:
        for name, kind in declared.spaces.items():
            if kind == FEDERATED:
                repo.add(name, FederatedSpace.on_node(runtime, driver, name))
            else:
                repo.add(name, Space(Kind(kind)))
        gates = [await repo.add_gate(uri) for uri in gate_uris]
        task_status.started(gates)
        await trio.sleep_forever()
