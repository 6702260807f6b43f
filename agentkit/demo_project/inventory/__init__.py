"""A tiny stock-keeping library (sample project of the agentkit demo)."""

from inventory.models import Item
from inventory.store import Store

__all__ = ["Item", "Store"]
