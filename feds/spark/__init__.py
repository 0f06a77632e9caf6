"""Spark jobs as leaf nodes: a PySpark driver joins a feds overlay and publishes its results.

::

    import feds.spark
    with feds.spark.join(spark, topology="topology/binary7.toml", parent="a") as leaf:
        df.write.format("feds").option("publication", "totals").mode("overwrite").save()
        rows = spark.read.format("feds").option("pattern", "<totals $k $v>").load()

:func:`join` starts a leaf node in this (the driver's) process, on a background trio thread
(:mod:`feds.spark.leaf`), and registers the ``feds`` data source (:mod:`feds.spark.source`)
bound to it. Tasks stage rows at the leaf and a write's commit publishes exactly the successful
attempts in one turn (:mod:`feds.spark.publications`); rows become records as described in
:mod:`feds.spark.convert`. Needs the ``spark`` extra: ``pip install 'feds[spark]'``.
"""

from __future__ import annotations

from typing import Any

from feds.limits import DEFAULT_NET_LIMITS
from feds.spark.leaf import Leaf

__all__ = ["Leaf", "join"]


def join(
    spark: Any,
    *,
    parent: str,
    topology: str | None = None,
    protocol: str | None = None,
    name: str = "spark",
    host: str = "127.0.0.1",
    advertise: str | None = None,
    timeout: float = 10.0,
    allow_unauthenticated: bool = False,
) -> Leaf:
    """Start a leaf under ``parent`` and register ``format("feds")`` with ``spark``.

    ``parent`` is a node of ``topology`` (a topology file, which also gives the protocol) or a
    ``host:port`` address (then give ``protocol`` unless it is the default, aggregate-subs).
    With ``topology``, the leaf takes the deployment's ``[limits]`` and its
    ``allow-unauthenticated``; a deployment with a secret file or TLS is refused
    (:class:`ValueError`): the leaf cannot authenticate its links and ports yet. ``host`` other
    than loopback (a cluster, where executors must reach the leaf) needs
    ``allow_unauthenticated`` (here or in the topology): see :class:`Leaf`. Waits up to
    ``timeout`` seconds for the uplink. Close the leaf (or use it as a context
    manager) after the Spark work: its publications are retracted when it leaves.
    """
    address = parent
    limits = DEFAULT_NET_LIMITS
    if topology is not None:
        from feds.topology import load

        topo = load(topology)
        if topo.secret_file is not None or topo.tls is not None:
            raise ValueError(
                f"{topology}: a Spark leaf cannot join a deployment with a secret file or TLS "
                "yet (it cannot authenticate its uplink, nor the tasks at its staging port)"
            )
        limits = topo.limits
        allow_unauthenticated = allow_unauthenticated or topo.allow_unauthenticated
        if parent in topo.nodes:
            host_, port = topo.address(parent)
            address = f"{host_}:{port}"
        protocol = protocol or topo.protocol
    leaf = Leaf(
        address,
        protocol or "aggregate-subs",
        name=name,
        host=host,
        advertise=advertise,
        timeout=timeout,
        limits=limits,
        allow_unauthenticated=allow_unauthenticated,
    )
    try:
        leaf.wait_connected(timeout)
        leaf.register(spark)
    except BaseException:
        leaf.close()
        raise
    return leaf
