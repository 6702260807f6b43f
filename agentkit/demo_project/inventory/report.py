"""Plain-text reports."""

from inventory.store import Store


def stock_report(store: Store) -> str:
    """Return one line per item and a total."""
    lines = [f"{item.name}: {item.quantity} x {item.unit_price:.2f}" for item in store.search("")]
    lines.append(f"total: {store.total_value():.2f}")
    # TODO: sort lines by value, largest first.
    return "\n".join(lines)
