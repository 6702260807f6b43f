from inventory import Item, Store


def test_add_merges_quantities() -> None:
    store = Store()
    store.add(Item("bolt", 2, 0.1))
    store.add(Item("bolt", 3, 0.1))
    assert store.search("bolt")[0].quantity == 5


def test_total_value() -> None:
    store = Store()
    store.add(Item("nut", 4, 0.5))
    assert store.total_value() == 2.0
