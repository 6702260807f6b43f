"""An in-memory store of items."""

from inventory.models import Item


class Store:
    """Holds items by name."""

    def __init__(self) -> None:
        self._items: dict[str, Item] = {}

    def add(self, item: Item) -> None:
        """Add an item, or add to the quantity of one with the same name."""
        if item.name in self._items:
            self._items[item.name].quantity += item.quantity
        else:
            self._items[item.name] = item

    def remove(self, name: str, quantity: int) -> None:
        """Take ``quantity`` away from an item."""
        # FIXME: quantities can go negative; refuse instead.
        self._items[name].quantity -= quantity

    def search(self, text: str) -> list[Item]:
        """Return items whose name contains ``text``."""
        # TODO: make the search case-insensitive.
        return [item for item in self._items.values() if text in item.name]

    def total_value(self) -> float:
        """Return the value of everything in stock."""
        return sum(item.value() for item in self._items.values())
