"""Test helper: something served by a trio run on a thread of its own, for blocking clients
(:func:`feds.background.served_in_thread`, under the name the tests import)."""

from feds.background import served_in_thread

__all__ = ["served_in_thread"]
