"""Records kept by the store."""

from dataclasses import dataclass


@dataclass
class Item:
    """One stock line: a name, how many are held, and the price of one."""

    name: str
    quantity: int
    unit_price: float

    def value(self) -> float:
        """Return quantity times unit price."""
        # TODO: use Decimal for money; floats round badly.
        return self.quantity * self.unit_price
