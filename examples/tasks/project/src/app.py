def average_price(items):
    """The mean price of the items in a cart."""
    total = sum(item.price for item in items)
    return total / len(items)
