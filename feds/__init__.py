"""feds: federated dataspaces — many nodes in a spanning tree that behave like one dataspace."""

from feds.values import FrozenDict, Record, Symbol, record, symbol

__all__ = ["FrozenDict", "Record", "Symbol", "record", "symbol"]
__version__ = "0.1.0"
