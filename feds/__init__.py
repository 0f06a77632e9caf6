"""feds: federated dataspaces — many nodes in a spanning tree that behave like one dataspace."""

from feds.blocking import BlockingClient
from feds.client import connect
from feds.values import FrozenDict, Record, Symbol, record, symbol

__all__ = ["BlockingClient", "FrozenDict", "Record", "Symbol", "connect", "record", "symbol"]
__version__ = "0.1.0"
